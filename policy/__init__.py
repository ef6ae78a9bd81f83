"""gpucluster's CrossGuard policy pack (`pulumi preview --policy-pack policy`).

policy/rules/  the rules, pure functions over a resource's type, name and properties;
               `policy.rules.check_recording` runs them all on a mock run or a plan
policy/pack.py the rules as pulumi-policy policies (imports pulumi_policy)
__main__.py    the pack's entry point (PolicyPack serves the analyzer; never imported)
"""
