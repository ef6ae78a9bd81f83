"""EFA network interface layout: which interface goes on which network card.

Pure: instance facts in, interface specs out. The rules are AWS's, from the
EC2 User Guide, "Maximize network bandwidth on Amazon EC2 instances with
multiple network cards"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html):

- the primary interface (card 0, device index 0) is an ENA interface, never
  `efa-only`, so the node keeps an IP interface for kubelet and pods;
- if card 0 supports EFA, it gets an `efa-only` interface at device index 1;
- every further EFA-capable card gets one `efa-only` interface at device
  index 0;
- the EFA-capable interfaces add up to the type's MaximumEfaInterfaces.

`efa-only` interfaces carry no IP address, so an 8-GPU node does not use up
32 VPC addresses and the VPC CNI leaves them alone. P5/P5e need this layout
for their full 3200 Gbps. Card counts alone are not enough: p6-b300 has 17
cards, of which card 0 is ENA-only and 16 carry EFA.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from components.core.hardware.catalog import InstanceType

InterfaceType = Literal["interface", "efa", "efa-only"]


@dataclass(frozen=True)
class NetworkInterfaceSpec:
    """One entry of a launch template's network interfaces."""

    network_card_index: int
    device_index: int
    interface_type: InterfaceType

    @property
    def is_efa(self) -> bool:
        return self.interface_type != "interface"


PRIMARY = NetworkInterfaceSpec(network_card_index=0, device_index=0, interface_type="interface")


def interface_layout(instance: InstanceType, efa_enabled: bool = True) -> list[NetworkInterfaceSpec]:
    """The interfaces to attach: the ENA primary, then one efa-only per EFA card up to the limit."""
    return list(_layout(instance, efa_enabled))


@functools.cache  # a type's layout never changes; config checks ask for it thousands of times
def _layout(instance: InstanceType, efa_enabled: bool) -> tuple[NetworkInterfaceSpec, ...]:
    if not (efa_enabled and instance.efa_supported):
        return (PRIMARY,)
    # Card 0's device index 0 is the primary; everywhere else index 0 is free.
    return (PRIMARY, *(NetworkInterfaceSpec(network_card_index=card, device_index=1 if card == 0 else 0,
                                            interface_type="efa-only")
                       for card in instance.efa_cards[:instance.max_efa_interfaces]))


def efa_interface_count(instance: InstanceType, efa_enabled: bool = True) -> int:
    """How many EFA devices a node of this type exposes (the vpc.amazonaws.com/efa resource)."""
    return sum(spec.is_efa for spec in interface_layout(instance, efa_enabled))
