"""The fleet's token rotator: the manager's credentials for each worker, renewed before they expire.

Kueue v0.19.2 reads a worker's credentials from a kubeconfig in a Secret of the manager (MultiKueueCluster
spec.clusterSource.kubeConfig, locationType Secret) and reconnects when that Secret changes
(pkg/controller/admissionchecks/multikueue/multikueuecluster.go: secretHandler, updateConfigAndRefreshWatchers).
So the credential is a service-account token of the worker, bound to an anchor Secret on the worker: a
rotation asks the worker for a new token bound to a new anchor, writes it into the manager's kubeconfig (whose
annotations name the current and the previous anchor), then deletes the anchor two rotations old, which revokes
its token (a bound token is valid only while its object exists); the token just replaced lives one more period.
A worker re-created, or a token refused, is reseeded from the seed Secret the manager's Pulumi program owns
(seed.py). The worker's tokens create and delete Secrets in their namespace, never read or list them.

These modules also run inside the cluster (a CronJob on a stock Python image, the package gpucluster_fleet_token
from a ConfigMap, with goodput's kubeapi.py beside them) and on an operator's machine
(`python -m components.core.fleet_token`): the standard library only, and each other, relatively.
"""
