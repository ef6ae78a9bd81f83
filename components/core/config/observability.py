"""gpucluster:observability: the metrics stack, its dashboards and alerts, TensorBoard; and the alert webhook secret."""

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, SecretStr, WithJsonSchema

from components.core.config.base import Bool, Choice, Int, Model, Number, Text, problem
from components.core.config.describe import Allowed, DefaultText, Secret

REMOTE_WRITE = ("none", "amp")
RETENTION_DAYS_DEFAULT = 15
PENDING_ALERT_MINUTES_DEFAULT = 30
# Standard topics only: Alertmanager's SNS notifier sends no MessageGroupId, which FIFO topics require
# (Amazon SNS Developer Guide, "Message grouping for FIFO topics").
SNS_TOPIC_ARN = r"arn:aws(-cn|-us-gov)?:sns:[a-z]{2}(-gov)?-[a-z]+-\d:\d{12}:[A-Za-z0-9_-]{1,256}"
# Slack's incoming webhooks (api.slack.com/messaging/webhooks): https://hooks.slack.com/services/T.../B.../...
SLACK_WEBHOOK = re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9]+/[A-Za-z0-9]+/[A-Za-z0-9]+")
SLACK_WEBHOOK_KEY = "alertSlackWebhookUrl"


NO_PROGRESS_MINUTES_DEFAULT = 20
STRAGGLER_RATIO_DEFAULT = 0.8
# Meta's Llama 3 run: 419 unexpected interruptions in 54 days on 16,384 H100 GPUs (2,048 nodes of 8), 78%
# of them hardware ("The Llama 3 Herd of Models", arXiv 2407.21783, section 3.3.4): 419 / (54 * 2048).
NODE_FAILURES_PER_DAY_DEFAULT = 0.0038
RECORD_RETENTION_DAYS_DEFAULT = 90


class GoodputConfig(Model):
    """The alerts that catch a slow or stalled job, and the plan's assumption about failures."""

    no_progress_minutes: Int(ge=2, le=1440) = Field(
        NO_PROGRESS_MINUTES_DEFAULT, description="alert when a running job that reports steps has reported none for "
                                                 "this long (JobNoProgress)")
    straggler_ratio: Number(gt=0, le=1) = Field(
        STRAGGLER_RATIO_DEFAULT, description="alert when one node of a job runs below this fraction of its peers' "
                                             "median: GPU utilisation, or steps per second for the job's reported "
                                             "step time (JobStraggler)")
    node_failures_per_day: Number(ge=0) = Field(
        NODE_FAILURES_PER_DAY_DEFAULT, description="the plan's assumption: unexpected failures per GPU node per day "
                                                   "(default: Meta's Llama 3 run on H100s), which sets the restarts "
                                                   "and lost work it models per job")
    record_retention_days: Int(ge=1, le=3650) = Field(
        RECORD_RETENTION_DAYS_DEFAULT, description="days the goodput controller keeps a job's record (`bootstrap "
                                                   "report`) after the job is deleted (from its hourly sweep that "
                                                   "first finds the job gone); a record of a job that is there is "
                                                   "kept")


class ObservabilityConfig(Model):
    """Prometheus, Grafana, Alertmanager, the GPU and EFA exporters, dashboards, alerts and TensorBoard."""

    enabled: Bool = Field(True, description="install the metrics stack, dashboards, alerts and TensorBoard; required "
                                            "by a team's `teams[].monthlyBudgetUsd` and a pool's "
                                            "`gpuPools[].remediation` dry-run or on")
    retention_days: Int(ge=1, le=365) = Field(
        RETENTION_DAYS_DEFAULT, description="days of metrics Prometheus keeps on its gp3 volume; at least 32 (a "
                                            "month and a day) with a `teams[].monthlyBudgetUsd`")
    volume_gib: Annotated[Int(ge=20, le=16384) | None, DefaultText("`100`")] = Field(
        None, description="Prometheus's gp3 volume; the plan warns when `retentionDays` of every pool at `maxNodes` "
                          "would not fit twice over (size-based retention then keeps fewer days). Set it before the "
                          "first `pulumi up`: the Prometheus Operator does not resize its claim afterwards")
    pending_alert_minutes: Int(ge=1, le=10080) = Field(
        PENDING_ALERT_MINUTES_DEFAULT, description="alert when a workload waits in the queue longer than this")
    remote_write: Choice(*REMOTE_WRITE) = Field(
        "none", description="`amp`: also remote-write every sample to a new Amazon Managed Service for Prometheus "
                            "workspace (for more than one Prometheus can hold)")
    alert_sns_topic_arn: Annotated[
        Text(SNS_TOPIC_ARN, "a standard (not FIFO) SNS topic ARN, arn:aws:sns:<region>:<account>:<name>",
             short="SNS topic ARN") | None,
        DefaultText("no receiver (Alertmanager's UI)")] = Field(
        None, description="Alertmanager publishes firing alerts to this topic (its own Pod Identity role may "
                          "sns:Publish to it only)")
    tensorboard: Bool = Field(True, description="a TensorBoard on the system nodes serving /fsx/tensorboard "
                                                "read-only (needs `enabled`)")
    goodput: GoodputConfig = Field(default_factory=GoodputConfig,
                                   description="the goodput alerts' thresholds and the plan's failure rate")

    @property
    def tensorboard_on(self) -> bool:
        """TensorBoard is installed (it comes with the metrics stack)."""
        return self.enabled and self.tensorboard


def _webhook(value: Any) -> SecretStr:
    # Never echo the value: it is a secret, and problems are printed.
    text = value.get_secret_value() if isinstance(value, SecretStr) else value
    if not isinstance(text, str) or not SLACK_WEBHOOK.fullmatch(text):
        raise problem("is not a Slack incoming-webhook URL (https://hooks.slack.com/services/...); the value is not "
                      "shown, it is a secret")
    return SecretStr(text)


# Its plaintext, as the engine decrypts it; the stack file holds the ciphertext only (StackConfig refuses
# a webhook the engine does not hold encrypted).
SlackWebhook = Annotated[SecretStr, BeforeValidator(_webhook), Secret(),
                         Allowed(None, short="secret (Slack webhook URL)"),
                         WithJsonSchema({"type": "string", "pattern": f"^{SLACK_WEBHOOK.pattern}$"})]
