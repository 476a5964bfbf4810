"""One Prefect test server for every flow test of this package that asks for ``prefect_server`` (a harness per
module cost 15-25 s of server start-up each on these machines; the flows' runs do not depend on one another's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="package")
def prefect_server() -> Iterator[None]:
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
