"""`gco doctor`: what an account or a machine lacks before `cdk deploy`, each finding with its fix.

`run_doctor` (`service`) runs the local checks (`local`: Node.js, the CDK CLI, Docker), the
Kubernetes version against EKS's calendar, and, given an `AccountReader` (`port`; the boto3 adapter
in `boto_reader`), the account's checks (`account`). The report (`model`) has one `Check` per
prerequisite; errors are in `errors`.
"""

from gco.doctor.errors import AccountReadError, DoctorError, NoCredentialsError
from gco.doctor.model import Check, Report
from gco.doctor.service import run_doctor

__all__ = ["AccountReadError", "Check", "DoctorError", "NoCredentialsError", "Report", "run_doctor"]
