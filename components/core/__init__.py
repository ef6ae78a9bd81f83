"""The functional core: pure facts and builders, no Pulumi resources, unit-tested on their own.

Layered bottom-up; a module imports only from its own layer or below
(tests/test_structure.py holds it to that):

    problems, versions, namespaces,  errors, pins, namespaces and where
    images, job_identity,            images are pulled from, the jobs' and
    cluster_access                   the API's identities, which all share
    hardware/                        instance catalog, EFA, NCCL, zones, registries
    config/                          the stack config schema and its reading
    storage/, planning/              S3 and FSx facts; sizing, cost, teardown, schedule
    kube/, stack_config              Kubernetes objects; config + the checks that need planning

The ComponentResources in components/aws and components/kubernetes wire
these into resources.
"""
