"""CSV for spreadsheets and the AWS nccl-tests recipe's tooling, written."""
