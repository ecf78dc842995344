# Copyright 2026 The fluidvim Authors
# SPDX-License-Identifier: Apache-2.0
"""Host power models, per-VNF power attribution and power-aware placement helpers.

A power model answers ``watts(u)``: the electrical power of a host at CPU utilisation ``u`` (0..1).
Every source has the same interface (:class:`PowerSource`): ``watts(u)``, ``measured_watts()``
(``None`` when the source only models) and ``source`` (its name). The sources, best first:

``rapl``       Intel RAPL through the powercap sysfs (``<root>/intel-rapl:N/energy_uj``), sampled
               over an interval together with ``/proc/stat``, so every measurement is a (u, W) pair.
``redfish``    the BMC's power reading through sushy (``Power`` → ``PowerControl[].PowerConsumedWatts``
               of the system's chassis, else the newer ``EnvironmentMetrics`` → ``PowerWatts.Reading``).
``specpower``  an 11-point SPECpower_ssj2008 curve (0, 10, …, 100 % load), linearly interpolated:
               a row of ``data/specpower_curves.csv`` by ``system_id`` or the host's own 11 points.
``linear``     ``P_idle + (P_max - P_idle) * u``.

A measured source turns its (u, W) observations into ``watts(u)``: with observations at two or more
distinct utilisations it fits a line; with one, it scales its *prior* (the best model source after
it in the chain) through that point; with none it is its prior. :func:`build_chain` tries the
configured sources in order (``[power] sources``) and reports which one won and why each other did
not (:class:`ChainResult`).

Per-VNF attribution (the Kepler / DEEP-mon ratio idea): a VNF is a QEMU process, so its power over
an interval is ``host watts * (VNF CPU time / host busy CPU time)`` from ``/proc/<pid>/stat`` and
``/proc/stat`` (:class:`ProcReader`, :func:`attribute_watts`, :func:`sample_vnf_power`).

Attribution by useful work (:mod:`.attribution`): the VNF's own busy time (its ``stats`` →
``cpu``), its host-side cost (the rest of its QEMU process's CPU, its vhost backend, its packet
share of softirq), a share of idle power by ``[power] idle_rule``, and an unattributed remainder,
adding up to the host's power every interval (:class:`Attributor`, :func:`attribute`); the
ratio above is kept as the comparison (:func:`ratio_watts`). :mod:`.exporter` serves it to
Prometheus (``fluidvim metrics serve``).

A latency-target controller (:mod:`.controller`) lowers a VNF's cgroup CPU quota while its p99
holds and gives it back at once when it does not (its cgroup and tap readers and its actuator
in :mod:`.hostside`); the exporter runs it. Frequency probing
(:mod:`.freq`): step ``scaling_max_freq`` down while a VNF's throughput holds
and keep the lowest (:func:`~.freq.probe`); a host without cpufreq is told, not touched.

Placement: :func:`marginal_watts` (the extra watts of adding load to a host), :func:`pabfd_choose`
(power-aware best-fit decreasing: the host with the least power increase that fits),
:func:`first_fit` / :func:`worst_fit` for comparison, :func:`consolidation_plan` (which hosts can
be emptied onto the others and sleep, net of what moving and waking them again costs),
:func:`scale_in_order` (which hosts a service scales in from first), :func:`wake_order` (which
powered-off host to wake first), :func:`efficient_utilisation` (the load a host does its work
at with the fewest watts per unit), :func:`fill_limit` (how far to fill a host before waking
another is better; against :func:`wake_unit_watts` when the wake would be for a few VNFs),
:func:`forecast_instances` (the instances a service's scaler will want one boot from now,
along the trend of its used slots), :func:`wake_ahead` (which hosts to wake now so that they
are up by then), :func:`keep_awake` (which empty hosts that room needs) and
:func:`rebalance_moves` (single VNFs from a dear host to a cheaper one in service, :mod:`.rebalance`).
``bench/energy`` runs them against Nomad's and Nova's schedulers on fleets drawn from the CSV.

The modules: :mod:`.models` (the interface, linear, SPECpower curves), :mod:`.sources` (RAPL,
Redfish, /proc and attribution), :mod:`.chain` (the ``[power]`` options, the fallback chain,
:class:`HostMarginalPower`), :mod:`.fleet` (placement helpers), :mod:`.consolidate` and :mod:`.cli`
(``python -m fluidvim.orchestrator.power``). Every name is importable from this package.
"""

from .attribution import (  # noqa: F401
    COMPONENTS,
    HOST_SIDE,
    IDLE_RULES,
    Attributor,
    HostCounters,
    Interval,
    VnfCounters,
    VnfDelta,
    VnfShare,
    attribute,
    counter_delta,
    idle_shares,
    net_rx_packets,
    pids_with_arg,
    ratio_watts,
    stats_counters,
)
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
from .consolidate import (  # noqa: F401
    ConsolidationPlan,
    Fill,
    Migration,
    consolidation_plan,
    over_fill,
    scale_in_order,
    scale_in_pick,
)
from .fleet import (  # noqa: F401
    FleetHost,
    ShortfallPeak,
    WakePersist,
    consolidation_gate,
    efficient_utilisation,
    fill_limit,
    first_fit,
    fleet_watts,
    forecast_instances,
    host_marginal,
    hosts_to_keep,
    keep_awake,
    marginal_watts,
    pabfd_choose,
    unit_watts,
    wake_ahead,
    wake_order,
    wake_unit_watts,
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
from .rebalance import (  # noqa: F401
    rebalance_moves,
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
