"""The stack's tags on the instances an Auto Scaling group already runs, when its tag is set or changed.

The stack's tags reach a node group's instances from its Auto Scaling group (components.aws.
node_group.instance_tags: PropagateAtLaunch), which tags only instances launched after the tag is
set (EC2 Auto Scaling User Guide, "Tag Auto Scaling groups and instances"). The tag resources wait
for their node group, so the nodes the group launched meanwhile (the system nodes, a pool's
minNodes, nodes a rolling update replaced) would go untagged until they are replaced: a cost report
by tag would miss them. After each such tag is created or changed, this tags the group's running
instances with it (CreateTags).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# EC2 Auto Scaling API Reference, Instance.LifecycleState: instances on their way out are left alone.
LEAVING = ("Terminating", "Terminating:Wait", "Terminating:Proceed", "Terminated", "Detaching", "Detached")


def running_instances(autoscaling: Any, asg_name: str) -> list[str]:
    groups = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])["AutoScalingGroups"]
    return sorted(i["InstanceId"] for g in groups for i in g.get("Instances", [])
                  if i.get("LifecycleState") not in LEAVING)


def tag_running_instances(autoscaling: Any, ec2: Any, asg_name: str, key: str, value: str,
                          log: Callable[[str], None] = print) -> list[str]:
    """Tag the group's running instances key=value; their ids."""
    ids = running_instances(autoscaling, asg_name)
    if ids:
        ec2.create_tags(Resources=ids, Tags=[{"Key": key, "Value": value}])
    log(f"{asg_name}: tag {key} on {len(ids)} running instance{'' if len(ids) == 1 else 's'}")
    return ids
