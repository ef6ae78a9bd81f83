"""Storage facts: the S3 bucket's naming and lifecycle, FSx for Lustre sizing and links, the FSx CSI volume,
a team's prefix and directory."""
