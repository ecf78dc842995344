# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""
The modules: :mod:`.models` (the interface, linear, SPECpower curves), :mod:`.sources` (RAPL,
Redfish, /proc and attribution), :mod:`.chain` (the ``[power]`` options, the fallback chain,
:class:`HostMarginalPower`), :mod:`.fleet` (placement helpers, consolidation) and :mod:`.cli`
(``python -m fluidvim.orchestrator.power``). Every name is importable from this package.
"""

from .chain import (  # noqa: F401
    ChainResult,
    HostMarginalPower,
    build_chain,
    list_opts,
    model_for_host,
    power_group,
    power_opts,
    register_opts,
)
from .cli import (  # noqa: F401
    EXAMPLES,
    main,
)
from .fleet import (  # noqa: F401
    ConsolidationPlan,
    FleetHost,
    Migration,
    consolidation_plan,
    first_fit,
    fleet_watts,
    host_marginal,
    marginal_watts,
    pabfd_choose,
    worst_fit,
)
from .models import (  # noqa: F401
    CURVE_COLUMNS,
    LOAD_POINTS,
    SOURCES,
    LinearModel,
    PowerError,
    PowerSource,
    SpecpowerCurve,
    SpecpowerLibrary,
    default_csv_path,
    library,
)
from .sources import (  # noqa: F401
    HostTicks,
    MeasuredSource,
    ProcReader,
    RaplSource,
    RedfishSource,
    VnfPower,
    attribute_watts,
    host_utilisation,
    sample_vnf_power,
)
