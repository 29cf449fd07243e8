"""User-facing errors: the CLI prints their message on one line and exits with code 2."""


class FedevoError(Exception):
    """Bad input a user can fix (bad problem file, missing data, out-of-range gene...)."""


class DataNotFoundError(FedevoError):
    """A dataset is not where it was looked for; the message says how to get it."""


class NoDeviceError(FedevoError):
    """device = 'cuda' where torch sees no GPU: a setup problem of the machine, like a missing dataset."""


class DivergedError(Exception):
    """Training produced NaN/inf; evaluation reports it as `status: diverged`."""
