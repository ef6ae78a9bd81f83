"""Teams on AWS: a namespace per team, an EKS access entry per member (a group, no access policy), a job
identity scoped to the team's prefix of the bucket, and the team's FSx directory as its `fsx` claim; nothing
of it without teams."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from components.core import cluster_access, job_identity
from components.core.config.text import stack_yaml
from components.core.problems import ConfigError
from components.core.storage import fsx_volume, team_data
from tests.conftest import ROOT, recording, stack_config

ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"
POLICY_ASSOCIATION = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
NAMESPACE = "kubernetes:core/v1:Namespace"
ROLE = "aws:iam/role:Role"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
MARKER = "aws:s3/bucketObjectv2:BucketObjectv2"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
EXTRA = ["arn:aws:iam::aws:policy/AmazonSageMakerReadOnly", "arn:aws:iam::210987654321:policy/team/wandb-secrets"]
MEMBERS = {
    "vision": ["arn:aws:iam::210987654321:role/vision-alice", "arn:aws:iam::210987654321:user/vision-bob"],
    "language": ["arn:aws:iam::210987654321:role/research/language-carol"],
}
TEAMS = ("vision", "language")


def prod_teams(members: dict[str, list[str]], policies: dict[str, list[str]] | None = None) -> list[dict]:
    """Pulumi.prod.yaml's teams, with members (and job policies)."""
    teams = stack_yaml.parse((ROOT / "Pulumi.prod.yaml").read_text(), "gpucluster").config["gpucluster:teams"]
    return [{**team, "members": members.get(team["name"], []),
             **({"jobPolicyArns": policies[team["name"]]} if policies and team["name"] in policies else {})}
            for team in teams]


@pytest.fixture(scope="module")
def prod():
    return recording("prod", {"gpucluster:teams": prod_teams(MEMBERS, {"vision": EXTRA[:1]}),
                              "gpucluster:jobPolicyArns": EXTRA})


def team_resources(rec, type_: str) -> list:
    return [r for r in rec.of_type(type_) if "-team-" in r.name or "-member-" in r.name]


# -- namespaces --------------------------------------------------------------------


def test_each_team_gets_its_namespace_labelled_as_the_training_one(prod):
    training = prod.named("gpucluster-prod-training-ns")
    for team in TEAMS:
        namespace = prod.named(f"gpucluster-prod-team-{team}-ns")
        assert namespace.inputs["metadata"] == {"name": team, "labels": {"app.kubernetes.io/part-of": "gpucluster"}}
        assert namespace.inputs["metadata"]["labels"] == training.inputs["metadata"]["labels"]
        assert namespace.provider == training.provider and namespace.parent == training.parent
    assert len(team_resources(prod, NAMESPACE)) == len(TEAMS)


# -- access entries ----------------------------------------------------------------


def test_each_member_gets_one_standard_entry_mapped_to_its_team_group_and_no_access_policy(prod):
    eks = prod.named("gpucluster-prod-eks")
    entries = {r.inputs["principalArn"]: r for r in team_resources(prod, ACCESS_ENTRY)}
    assert sorted(entries) == sorted(arn for arns in MEMBERS.values() for arn in arns)
    for team, arns in MEMBERS.items():
        for arn in arns:
            entry = entries[arn]
            # Named after the principal alone (one entry per principal: EKS); known by its admin name too.
            slug = cluster_access.principal_slug(arn)
            assert entry.name == f"gpucluster-prod-member-{slug}"
            assert entry.aliases == [f"gpucluster-prod-admin-{slug}"]
            assert entry.inputs["kubernetesGroups"] == [f"gpucluster:team:{team}"]
            assert entry.inputs["type"] == "STANDARD" and "username" not in entry.inputs
            assert entry.inputs["clusterName"] == eks.outputs["name"] and prod.depends_on(entry, eks)
    # Only the admins' entries have an access policy: a member's rights are its group's Role, in its namespace.
    members = set(entries)
    associations = prod.of_type(POLICY_ASSOCIATION)
    assert associations and not members & {a.inputs["principalArn"] for a in associations}
    admins = {r.inputs["principalArn"] for r in prod.of_type(ACCESS_ENTRY)} - members
    assert {a.inputs["principalArn"] for a in associations} == admins == set(stack_config("prod").admin_principal_arns)
    # The deployer's API access waits for the admins only, never for a member's entry.
    provider = prod.named("gpucluster-prod-k8s")
    assert all(prod.depends_on(provider, a) for a in associations)
    assert not any(prod.depends_on(provider, entry) for entry in entries.values())


def test_a_member_moved_to_another_team_keeps_its_entry_and_only_its_group_changes(prod):
    arn = MEMBERS["vision"][0]
    moved = {t: [a for a in arns if a != arn] for t, arns in MEMBERS.items()}
    moved["language"] = [*moved["language"], arn]
    rec = recording("prod", {"gpucluster:teams": prod_teams(moved), "gpucluster:jobPolicyArns": EXTRA})

    def entry(r):
        return next(e for e in team_resources(r, ACCESS_ENTRY) if e.inputs["principalArn"] == arn)

    assert entry(rec).name == entry(prod).name  # an update in place, never a second entry for the principal
    assert (entry(prod).inputs["kubernetesGroups"], entry(rec).inputs["kubernetesGroups"]) == (
        ["gpucluster:team:vision"], ["gpucluster:team:language"])


def test_an_admin_entry_answers_to_the_member_name_of_its_principal(prod):
    # An admin who becomes a member (or back) in one `pulumi up`: the alias makes it the same entry updated,
    # not a new one EKS would refuse while the old one still exists.
    for admin in prod.of_type(ACCESS_ENTRY):
        if admin.name.startswith("gpucluster-prod-admin-"):
            assert admin.aliases == [admin.name.replace("-admin-", "-member-", 1)]


def test_member_entries_keep_their_names_when_members_are_reordered(prod):
    reordered = recording("prod", {"gpucluster:teams": prod_teams({t: arns[::-1] for t, arns in MEMBERS.items()}),
                                   "gpucluster:jobPolicyArns": EXTRA})

    def names(rec):
        return sorted((r.name, r.inputs["principalArn"]) for r in team_resources(rec, ACCESS_ENTRY))

    assert names(reordered) == names(prod) and len(names(prod)) == 3


@dataclass(frozen=True)
class _Team:
    name: str
    members: tuple[str, ...]
    group: str


@pytest.mark.parametrize("group", ["system:masters", "system:nodes", "eks:team", "aws:team", "amazon:x", "iam:x"])
def test_a_group_eks_reserves_is_refused_before_any_entry(group):
    prefix = group.split(":")[0] + ":"
    assert cluster_access.group_problem(group) == f"Kubernetes group {group!r} starts with {prefix!r}, which EKS reserves"
    with pytest.raises(ValueError, match=f"^team vision: Kubernetes group '{group}' starts with"):
        cluster_access.member_entries([_Team("vision", ("arn:aws:iam::210987654321:role/a",), group)])


def test_the_team_groups_are_names_eks_accepts():
    teams = stack_config("prod", {"gpucluster:teams": prod_teams(MEMBERS)}).teams
    assert [t.group for t in teams] == ["gpucluster:team:vision", "gpucluster:team:language"]
    assert [cluster_access.group_problem(t.group) for t in teams] == [None, None]
    entries = cluster_access.member_entries(teams)
    assert [(e.team, e.group) for e in entries] == [("vision", "gpucluster:team:vision")] * 2 + [
        ("language", "gpucluster:team:language")]


# -- job identities ----------------------------------------------------------------


def test_each_team_role_is_trusted_by_its_namespace_default_service_account_only(prod):
    for team in TEAMS:
        trust = json.loads(prod.named(f"gpucluster-prod-team-{team}-job-role").inputs["assumeRolePolicy"])
        (statement,) = trust["Statement"]
        assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"]
        assert statement["Condition"] == {"StringEquals": {
            "aws:RequestTag/eks-cluster-arn": "arn:aws:eks:us-east-1:000000000000:cluster/gpucluster-prod",
            "aws:RequestTag/kubernetes-namespace": team,
            "aws:RequestTag/kubernetes-service-account": "default"}}


def test_each_team_role_lists_and_touches_only_its_prefix_of_the_bucket(prod):
    bucket = prod.named("gpucluster-prod-storage-bucket").outputs["arn"]
    for team in TEAMS:
        access = prod.named(f"gpucluster-prod-team-{team}-job-bucket-access")
        assert access.inputs["role"] == prod.named(f"gpucluster-prod-team-{team}-job-role").outputs["name"]
        assert json.loads(access.inputs["policy"]) == {"Version": "2012-10-17", "Statement": [
            {"Sid": "ListPrefix", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": bucket,
             "Condition": {"StringLike": {"s3:prefix": [f"teams/{team}/*"]}}},
            {"Sid": "BucketLocation", "Effect": "Allow", "Action": ["s3:GetBucketLocation"], "Resource": bucket},
            {"Sid": "PrefixObjects", "Effect": "Allow", "Resource": f"{bucket}/teams/{team}/*",
             "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                        "s3:ListMultipartUploadParts", "s3:GetObjectTagging", "s3:PutObjectTagging"]}]}
    # The training namespace's role keeps the whole bucket.
    training = json.loads(prod.named("gpucluster-prod-job-identity-bucket-access").inputs["policy"])
    assert [s["Resource"] for s in training["Statement"]] == [bucket, f"{bucket}/*"]


def test_each_team_role_gets_its_own_policies_never_the_training_namespace_s(prod):
    # The stack's jobPolicyArns (an S3 read-only policy, say) would reach every team's prefix: they are the
    # training role's only; a team's are teams[].jobPolicyArns.
    for team, expected in (("vision", EXTRA[:1]), ("language", [])):
        role = prod.named(f"gpucluster-prod-team-{team}-job-role")
        attached = [r for r in prod.of_type(ATTACHMENT) if r.name.startswith(f"gpucluster-prod-team-{team}-job-")]
        assert sorted(r.inputs["policyArn"] for r in attached) == expected
        assert all(r.inputs["role"] == role.outputs["name"] for r in attached)
    training = [r.inputs["policyArn"] for r in prod.of_type(ATTACHMENT) if r.name.startswith("gpucluster-prod-job-")]
    assert sorted(training) == sorted(EXTRA)


def test_each_team_namespace_default_account_is_associated_after_the_agent(prod):
    eks = prod.named("gpucluster-prod-eks")
    (agent,) = [r for r in prod.of_type("aws:eks/addon:Addon") if r.inputs["addonName"] == "eks-pod-identity-agent"]
    for team in TEAMS:
        association = prod.named(f"gpucluster-prod-team-{team}-job-pod-identity")
        assert {k: association.inputs[k] for k in ("clusterName", "namespace", "serviceAccount", "roleArn")} == {
            "clusterName": eks.outputs["name"], "namespace": team, "serviceAccount": "default",
            "roleArn": prod.named(f"gpucluster-prod-team-{team}-job-role").outputs["arn"]}
        assert prod.depends_on(association, agent)
        assert prod.depends_on(association, prod.named(f"gpucluster-prod-team-{team}-job-bucket-access"))
    assert len(team_resources(prod, ASSOCIATION)) == len(TEAMS)
    assert prod.stack_outputs["teamJobRoleArns"] == {
        team: prod.named(f"gpucluster-prod-team-{team}-job-role").outputs["arn"] for team in TEAMS}


def test_team_role_names_fit_iam_for_the_longest_team_name():
    longest = "t" * 24  # TeamConfig.name: at most 24
    name = job_identity.team_identity_name("gpucluster-prod", longest)
    assert name == f"gpucluster-prod-team-{longest}-job"
    # Pulumi names the role `<name>-role-<7 hex>`: 62 characters, within CreateRole's 64.
    assert len(f"{name}-role") + 8 == 62
    # A cluster name too long to fit is cut (the team part keeps the names distinct).
    cluster = "a-very-long-cluster-name-for-many-teams"
    cut = [job_identity.team_identity_name(cluster, t) for t in (longest, "u" * 24)]
    assert cut == [f"a-very-long-clust-team-{'t' * 24}-job", f"a-very-long-clust-team-{'u' * 24}-job"]
    assert [len(f"{n}-role") + 8 for n in cut] == [64, 64]
    # A short team leaves room for all of it: 39 + "-team-ml-job" + "-role" + 8 = 64.
    assert job_identity.team_identity_name(cluster, "ml") == f"{cluster}-team-ml-job"


def test_every_role_the_program_names_for_a_long_team_fits_iam():
    team = {"name": "computer-vision-research", "pools": {"h100": {"guaranteedGpus": 32}}}
    assert len(team["name"]) == 24
    rec = recording("prod", {"gpucluster:teams": [team]})
    (role,) = [r for r in rec.of_type(ROLE) if "-team-" in r.name]
    assert role.outputs["name"].startswith("gpucluster-prod-team-computer-vision-research-job-role-")
    assert len(role.outputs["name"]) == 62


# -- the team's FSx directory ------------------------------------------------------


def test_a_team_s_data_is_one_prefix_and_the_same_directory():
    assert team_data.s3_prefix("vision") == "teams/vision/"
    assert team_data.directory("vision") == "/teams/vision"
    assert team_data.directory_marker_key("vision") == "teams/vision/"
    # The CSI driver mounts "<dnsname>@tcp:/<mountname>" (node.go): the fileset of the team's directory.
    assert fsx_volume.subdirectory_mount_name("abcdefgh", "/teams/vision") == "abcdefgh/teams/vision"


def test_each_team_directory_is_an_s3_directory_marker_imported_through_the_link_and_never_deleted(prod):
    bucket = prod.named("gpucluster-prod-storage-bucket")
    (link,) = prod.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    assert link.inputs["fileSystemPath"] == "/" and "NEW" in link.inputs["s3"]["autoImportPolicy"]["events"]
    for team in TEAMS:
        marker = prod.named(f"gpucluster-prod-fsx-team-{team}-dir")
        assert marker.type == MARKER
        assert marker.inputs == {"bucket": bucket.outputs["bucket"], "key": f"teams/{team}/"}  # empty
        assert marker.retain_on_delete and sorted(marker.ignore_changes) == ["contentType", "metadata"]
        assert prod.depends_on(marker, link)
    assert len(prod.of_type(MARKER)) == len(TEAMS)


def test_each_team_namespace_claims_fsx_on_a_pv_of_its_directory_only(prod):
    fs = prod.named("gpucluster-prod-storage-fsx")
    fs_id, dns, mount = fs.id, fs.outputs["dnsName"], fs.outputs["mountName"]
    (addon,) = [r for r in prod.of_type("aws:eks/addon:Addon") if r.inputs["addonName"] == "aws-fsx-csi-driver"]
    names = {prod.named("gpucluster-prod-fsx-pv").inputs["metadata"]["name"]}
    for team in TEAMS:
        pv = prod.named(f"gpucluster-prod-fsx-team-{team}-pv")
        assert pv.inputs["metadata"] == {"name": f"{team}-fsx-{fs_id}",
                                         "labels": {"app.kubernetes.io/part-of": "gpucluster"}}
        assert pv.inputs["spec"] == {
            "capacity": {"storage": "48000Gi"}, "volumeMode": "Filesystem", "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "", "mountOptions": ["flock"],
            "claimRef": {"namespace": team, "name": "fsx"},
            "csi": {"driver": "fsx.csi.aws.com", "volumeHandle": fs_id,
                    "volumeAttributes": {"dnsname": dns, "mountname": f"{mount}/teams/{team}"}}}
        assert prod.depends_on(pv, addon) and prod.depends_on(pv, prod.named(f"gpucluster-prod-fsx-team-{team}-dir"))
        pvc = prod.named(f"gpucluster-prod-fsx-team-{team}-pvc")
        assert pvc.inputs["metadata"] == {"name": "fsx", "namespace": team,
                                          "labels": {"app.kubernetes.io/part-of": "gpucluster"}}
        assert pvc.inputs["spec"] == {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                                      "volumeName": f"{team}-fsx-{fs_id}", "resources": {"requests": {"storage": "1Gi"}}}
        assert prod.depends_on(pvc, prod.named(f"gpucluster-prod-team-{team}-ns")) and prod.depends_on(pvc, pv)
        assert pvc.replace_on_changes == ["spec"] and pvc.delete_before_replace
        names.add(pv.inputs["metadata"]["name"])
    assert len(names) == 1 + len(TEAMS)  # one PV per claim, per file system
    # The training namespace's claim still mounts the whole file system.
    training = prod.named("gpucluster-prod-fsx-pv").inputs["spec"]["csi"]["volumeAttributes"]
    assert training == {"dnsname": dns, "mountname": mount}


def test_teams_without_the_s3_link_are_refused_before_anything_registers():
    storage = {**stack_yaml.parse((ROOT / "Pulumi.prod.yaml").read_text(), "gpucluster").config["gpucluster:storage"],
               "s3Link": False}
    with pytest.raises(ConfigError) as err:
        stack_config("prod", {"gpucluster:teams": prod_teams(MEMBERS), "gpucluster:storage": storage})
    assert [(p.path, p.message) for p in err.value.problems] == [(
        "gpucluster:storage.s3Link", "is false, but gpucluster:teams needs it: each team's directory on the file "
        "system (/teams/<name>) is its S3 prefix teams/<name>/, brought in by the link")]


# -- without teams -----------------------------------------------------------------


@pytest.mark.parametrize("stack, overrides", [("dev", None), ("prod", {"gpucluster:teams": []})])
def test_a_stack_without_teams_registers_nothing_of_them(stack, overrides):
    rec = recording(stack, overrides)
    assert [r.name for r in rec.resources if "-team-" in r.name] == []
    assert rec.of_type(MARKER) == []
    assert len(rec.of_type(PV)) == len(rec.of_type(PVC)) == 1
    assert [r.name for r in rec.of_type("gpucluster:index:JobIdentity")] == [f"gpucluster-{stack}-job-identity"]
    assert len(rec.of_type(ACCESS_ENTRY)) == len(rec.of_type(POLICY_ASSOCIATION))  # admins only
    assert "teamJobRoleArns" not in rec.stack_outputs
