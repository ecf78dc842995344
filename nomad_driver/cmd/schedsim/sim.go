// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"sort"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/nomad/state"
	"github.com/hashicorp/nomad/nomad/structs"
	"github.com/hashicorp/nomad/scheduler"
	sstructs "github.com/hashicorp/nomad/scheduler/structs"
)

// Sim is one Nomad "cluster" in process: Nomad's state store, Nomad's service scheduler and
// the PlanBuilder the scheduler's test harness (scheduler/tests.Harness) is made of, which
// applies each plan to the state store the way the leader's plan applier does. It maps the
// simulator's instance ids to allocation IDs and its host ids to node IDs.
type Sim struct {
	state   *state.StateStore
	planner *sstructs.PlanBuilder
	logger  hclog.Logger
	events  chan interface{}
	ids     *idSource

	// recheck false: a count-only job update re-points the job's running allocations to the
	// new job version instead of leaving Nomad to re-check each of them (see repoint).
	recheck bool
	running map[string]*structs.Job // recheck off: the job version each service's allocations run

	nodeOf   map[string]string // host id -> node ID
	hostOf   map[string]string // node ID -> host id
	jobs     map[string]*structs.Job
	shapes   map[string]serviceShape
	allocOf  map[string]string // instance id -> alloc ID
	instance map[string]string // alloc ID -> instance id
}

// schedulerConfig is Nomad's default (nomad/config.go DefaultSchedulerConfig) with the
// algorithm chosen, as `nomad operator scheduler set-config -scheduler-algorithm` sets it.
func schedulerConfig(algorithm string) (*structs.SchedulerConfiguration, error) {
	a := structs.SchedulerAlgorithm(algorithm)
	if a != structs.SchedulerAlgorithmBinpack && a != structs.SchedulerAlgorithmSpread {
		return nil, fmt.Errorf("algorithm: %q; use \"binpack\" or \"spread\"", algorithm)
	}
	return &structs.SchedulerConfiguration{
		SchedulerAlgorithm: a,
		PreemptionConfig:   structs.PreemptionConfig{SystemSchedulerEnabled: true},
	}, nil
}

// newSim is a fresh cluster of these hosts, all ready and eligible, nothing placed.
func newSim(algorithm string, hosts []hostSpec, seed int64, logger hclog.Logger) (*Sim, error) {
	return newSimRecheck(algorithm, hosts, seed, true, logger)
}

// newSimRecheck is newSim with the recheck mode chosen (see Sim.recheck and repoint).
func newSimRecheck(algorithm string, hosts []hostSpec, seed int64, recheck bool, logger hclog.Logger) (*Sim, error) {
	cfg, err := schedulerConfig(algorithm)
	if err != nil {
		return nil, err
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("hosts: empty; give at least one {id, cores, mhz, memory_mb}")
	}
	st, err := state.NewStateStore(&state.StateStoreConfig{
		Logger: logger, Region: "global", JobTrackedVersions: structs.JobDefaultTrackedVersions})
	if err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
	s := &Sim{
		state: st, planner: sstructs.NewPlanWithStateAndIndex(st, 1, true), logger: logger,
		events: make(chan interface{}), ids: newIDSource(seed), recheck: recheck,
		nodeOf: map[string]string{}, hostOf: map[string]string{}, jobs: map[string]*structs.Job{},
		shapes: map[string]serviceShape{}, allocOf: map[string]string{}, instance: map[string]string{},
		running: map[string]*structs.Job{},
	}
	go s.drainEvents()
	if err := st.SchedulerSetConfig(s.planner.NextIndex(), cfg); err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	return s, s.addNodes(hosts)
}

// drainEvents logs what the scheduler reports on its events channel (port collisions).
func (s *Sim) drainEvents() {
	for e := range s.events {
		s.logger.Warn("scheduler event", "event", fmt.Sprintf("%+v", e))
	}
}

func (s *Sim) close() { close(s.events) }

func (s *Sim) addNodes(hosts []hostSpec) error {
	for i, h := range hosts {
		if err := h.validate(i); err != nil {
			return err
		}
		if _, dup := s.nodeOf[h.ID]; dup {
			return fmt.Errorf("hosts[%d].id: %q appears twice; host ids must be unique", i, h.ID)
		}
		n := newNode(h, s.ids.next(), s.ids.next())
		if err := s.state.UpsertNode(structs.MsgTypeTestSetup, s.planner.NextIndex(), n); err != nil {
			return fmt.Errorf("hosts[%d]: upsert node: %w", i, err)
		}
		s.nodeOf[h.ID], s.hostOf[n.ID] = n.ID, h.ID
	}
	return nil
}

// setEligible is `nomad node eligibility -enable|-disable`.
func (s *Sim) setEligible(host string, eligible bool) error {
	id, ok := s.nodeOf[host]
	if !ok {
		return fmt.Errorf("host: %q is not in the fleet given to start", host)
	}
	e := structs.NodeSchedulingIneligible
	if eligible {
		e = structs.NodeSchedulingEligible
	}
	return s.state.UpdateNodeEligibility(structs.MsgTypeTestSetup, s.planner.NextIndex(), id, e,
		time.Now().UnixNano(), nil)
}

// liveAllocs are the service's allocations Nomad has not stopped, oldest name index first.
func (s *Sim) liveAllocs(service string) ([]*structs.Allocation, error) {
	all, err := s.state.AllocsByJob(nil, structs.DefaultNamespace, service, true)
	if err != nil {
		return nil, err
	}
	live := make([]*structs.Allocation, 0, len(all))
	for _, a := range all {
		if !a.TerminalStatus() {
			live = append(live, a)
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i].Index() < live[j].Index() })
	return live, nil
}

// register upserts the service's job with this count (a new job version, as `nomad job run`
// and `nomad job scale` do).
func (s *Sim) register(service string, shape serviceShape, count int) (*structs.Job, error) {
	var job *structs.Job
	old, existed := s.jobs[service]
	if existed {
		job = withCount(old, count)
	} else {
		job = newJob(service, shape, count)
	}
	index := s.planner.NextIndex()
	if err := s.state.UpsertJob(structs.MsgTypeTestSetup, index, nil, job); err != nil {
		return nil, fmt.Errorf("register job %q: %w", service, err)
	}
	s.jobs[service], s.shapes[service] = job, shape
	if !s.recheck {
		return job, s.repoint(job, index)
	}
	return job, nil
}

// repoint (recheck off) gives the job's allocations the job version just registered. A count
// change is a new job version (JobModifyIndex), and Nomad's reconciler then re-checks every
// running allocation for an in-place update on its node (genericAllocUpdateFn: one
// stack.Select each): that is almost all of an evaluation's time when a job has thousands of
// allocations. For a count-only change on nodes whose attributes never change, as here, that
// re-check always ends "in place, same node, same resources" (the allocation is discounted,
// then fitted again where it already was), and its outcome enters no placement or scale-in
// decision: the plan's in-place copies count the same resources in ProposedAllocs as the
// allocations they replace. Re-pointed, the reconciler finds the allocations already at the
// job's version and ignores them instead, and every placement and stop is Nomad's as before -
// checked field for field against recheck runs (TestRecheckOffDecidesTheSame, and the
// recorded days in nomad_policy.py's doc). What it leaves out of the Process time is the
// re-check's cost, which a Nomad server pays.
//
// How: the service's allocations all point at one Job object of the harness's, s.running,
// which takes the registered version's fields (a struct copy: O(1), where upserting thousands
// of allocations per count change cost ~0.5 s at 1,000 hosts). Only allocations not yet
// pointing at it (placed since the last registration, which Nomad's plan applier and client
// update gave their own copy) are upserted, in the registration's state index, so that the
// index sequence, which seeds Nomad's node shuffle, is the one of a recheck run. The object
// is not the stored job (s.jobs): only allocations hold it, and the harness, single-threaded,
// keeps no older snapshot that could see it change.
func (s *Sim) repoint(job *structs.Job, index uint64) error {
	running, ok := s.running[job.ID]
	if !ok {
		running = new(structs.Job)
		s.running[job.ID] = running
	}
	*running = *job
	all, err := s.state.AllocsByJob(nil, job.Namespace, job.ID, true)
	if err != nil {
		return err
	}
	var updated []*structs.Allocation
	for _, a := range all {
		if a.Job != running {
			c := a.CopySkipJob()
			c.Job = running
			updated = append(updated, c)
		}
	}
	if len(updated) == 0 {
		return nil
	}
	if err := s.state.UpsertAllocs(structs.MsgTypeTestSetup, index, updated); err != nil {
		return fmt.Errorf("re-point allocations of %q: %w", job.ID, err)
	}
	return nil
}

// timing is what one Scheduler.Process took: wall clock, and CPU time of this process (all
// threads, incl. the garbage collector's share), which a loaded machine inflates far less.
type timing struct{ Wall, CPU time.Duration }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// evaluate runs one evaluation of the job through Nomad's service scheduler, as a server's
// scheduling worker does: the eval in the state store, a state snapshot, Process. The time
// returned is Process's (reconcile, feasibility, ranking, plan submission and apply).
func (s *Sim) evaluate(job *structs.Job, trigger string) (timing, error) {
	eval := &structs.Evaluation{
		ID: s.ids.next(), Namespace: job.Namespace, Priority: job.Priority, Type: job.Type,
		TriggeredBy: trigger, JobID: job.ID, JobModifyIndex: job.JobModifyIndex,
		Status: structs.EvalStatusPending, CreateTime: time.Now().UnixNano(),
	}
	if err := s.state.UpsertEvals(structs.MsgTypeTestSetup, s.planner.NextIndex(), []*structs.Evaluation{eval}); err != nil {
		return timing{}, fmt.Errorf("upsert eval: %w", err)
	}
	snap, err := s.state.Snapshot()
	if err != nil {
		return timing{}, fmt.Errorf("state snapshot: %w", err)
	}
	sched := scheduler.NewServiceScheduler(s.logger, s.events, snap, s.planner)
	start, cpu := time.Now(), cpuTime()
	err = sched.Process(eval)
	took := timing{Wall: time.Since(start), CPU: cpuTime() - cpu}
	if err != nil {
		return took, fmt.Errorf("scheduler: %w", err)
	}
	if !s.recheck && len(s.planner.Plans) == 0 && s.hasAllocs(job) {
		// With recheck, the in-place updates of the job's allocations make the plan no no-op,
		// and its submission takes an index; without them a plan that places nothing is not
		// submitted. Take that index here so that the sequence (Nomad's shuffle seed) stays.
		s.planner.NextIndex()
	}
	return took, s.collect(eval.ID)
}

func (s *Sim) hasAllocs(job *structs.Job) bool {
	all, err := s.state.AllocsByJob(nil, job.Namespace, job.ID, true)
	return err == nil && len(all) > 0
}

// collect drops the eval (and the blocked eval a failed placement creates: the simulator
// refuses what does not fit now, it does not queue it) once Process has run, as Nomad's eval
// GC eventually does, so that the store does not grow with the run.
func (s *Sim) collect(evalID string) error {
	s.planner.Plans, s.planner.Evals, s.planner.CreateEvals, s.planner.ReblockEvals = nil, nil, nil, nil
	return s.state.DeleteEval(s.planner.NextIndex(), []string{evalID}, nil, false)
}

// markRunning is each client reporting its new allocations running.
func (s *Sim) markRunning(allocs []*structs.Allocation) error {
	return s.clientUpdate(allocs, structs.AllocClientStatusRunning)
}

func (s *Sim) clientUpdate(allocs []*structs.Allocation, status string) error {
	if len(allocs) == 0 {
		return nil
	}
	updates := make([]*structs.Allocation, len(allocs))
	for i, a := range allocs {
		updates[i] = &structs.Allocation{ID: a.ID, JobID: a.JobID, Namespace: a.Namespace,
			NodeID: a.NodeID, TaskGroup: a.TaskGroup, ClientStatus: status, ModifyTime: time.Now().UnixNano()}
	}
	return s.state.UpdateAllocsFromClient(structs.MsgTypeTestSetup, s.planner.NextIndex(), updates)
}

// forget is the core GC of terminal allocations: they leave the store and the id maps.
func (s *Sim) forget(allocs []*structs.Allocation) error {
	ids := make([]string, len(allocs))
	for i, a := range allocs {
		ids[i] = a.ID
		delete(s.allocOf, s.instance[a.ID])
		delete(s.instance, a.ID)
	}
	if len(ids) == 0 {
		return nil
	}
	return s.state.DeleteEval(s.planner.NextIndex(), nil, ids, false)
}
