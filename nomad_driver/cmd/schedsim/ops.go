// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	"github.com/hashicorp/nomad/nomad/structs"
)

// The simulator's operations on a Sim: place (count up), scale_in (count down, Nomad picks
// which), stop (these instances are gone). Each keeps the job's count equal to its live
// allocations between operations, so no evaluation ever replaces what the simulator removed.

// placement is one instance's outcome; Host nil = refused (no node fits).
type placement struct {
	Instance string  `json:"instance"`
	Host     *string `json:"host"`
}

func (s *Sim) checkShape(service string, shape serviceShape) error {
	switch {
	case service == "":
		return fmt.Errorf("service: empty; name the VNF service")
	case shape.CPUMHz <= 0:
		return fmt.Errorf("cpu_mhz: %d; must be > 0 (the task's resources.cpu)", shape.CPUMHz)
	case shape.MemoryMB <= 0:
		return fmt.Errorf("memory_mb: %d; must be > 0 (the task's resources.memory)", shape.MemoryMB)
	}
	if old, ok := s.shapes[service]; ok && old != shape {
		return fmt.Errorf("cpu_mhz/memory_mb: service %q was placed with cpu_mhz=%d memory_mb=%d, "+
			"now %d/%d; a shape change is a destructive job update that replaces every instance, "+
			"name the new shape a new service", service, old.CPUMHz, old.MemoryMB, shape.CPUMHz, shape.MemoryMB)
	}
	return nil
}

func (s *Sim) checkNewInstances(instances []string) error {
	if len(instances) == 0 {
		return fmt.Errorf("instances: empty; give the ids of the instances to place")
	}
	seen := map[string]bool{}
	for i, id := range instances {
		if _, known := s.allocOf[id]; known || seen[id] || id == "" {
			return fmt.Errorf("instances[%d]: %q is empty, repeated or already placed; ids must be new", i, id)
		}
		seen[id] = true
	}
	return nil
}

// place raises the service's count by len(instances) and lets Nomad place them.
func (s *Sim) place(service string, shape serviceShape, instances []string) ([]placement, timing, error) {
	if err := s.checkShape(service, shape); err != nil {
		return nil, timing{}, err
	}
	if err := s.checkNewInstances(instances); err != nil {
		return nil, timing{}, err
	}
	live, err := s.liveAllocs(service)
	if err != nil {
		return nil, timing{}, err
	}
	trigger := structs.EvalTriggerScaling // `nomad job scale`
	if _, ok := s.jobs[service]; !ok {
		trigger = structs.EvalTriggerJobRegister // `nomad job run`
	}
	job, err := s.register(service, shape, len(live)+len(instances))
	if err != nil {
		return nil, timing{}, err
	}
	took, err := s.evaluate(job, trigger)
	if err != nil {
		return nil, took, err
	}
	placed, err := s.newAllocs(service, len(live))
	if err != nil {
		return nil, took, err
	}
	if len(placed) > len(instances) {
		//lint:ignore ST1005 Nomad is a name
		return nil, took, fmt.Errorf("Nomad placed %d allocations for %d instances", len(placed), len(instances))
	}
	if err := s.markRunning(placed); err != nil {
		return nil, took, err
	}
	if len(placed) < len(instances) { // refused: dropped, not queued as a blocked eval would be
		if _, err := s.register(service, shape, len(live)+len(placed)); err != nil {
			return nil, took, err
		}
	}
	return s.bind(instances, placed), took, nil
}

// newAllocs are the service's live allocations that no instance holds yet; Nomad must not
// have stopped any of the `before` it had.
func (s *Sim) newAllocs(service string, before int) ([]*structs.Allocation, error) {
	live, err := s.liveAllocs(service)
	if err != nil {
		return nil, err
	}
	var fresh []*structs.Allocation
	for _, a := range live {
		if _, known := s.instance[a.ID]; !known {
			fresh = append(fresh, a)
		}
	}
	if kept := len(live) - len(fresh); kept != before {
		//lint:ignore ST1005 Nomad is a name
		return nil, fmt.Errorf("Nomad kept %d of the %d running instances of %q while scaling up", kept, before, service)
	}
	return fresh, nil
}

// bind maps instances, in order, to the allocations placed (by name index); the rest are refused.
func (s *Sim) bind(instances []string, placed []*structs.Allocation) []placement {
	out := make([]placement, len(instances))
	for i, id := range instances {
		out[i].Instance = id
		if i < len(placed) {
			host := s.hostOf[placed[i].NodeID]
			out[i].Host = &host
			s.allocOf[id], s.instance[placed[i].ID] = placed[i].ID, id
		}
	}
	return out
}

// scaleIn lowers the service's count by n; Nomad chooses which allocations stop.
func (s *Sim) scaleIn(service string, n int) ([]string, timing, error) {
	live, err := s.liveAllocs(service)
	if err != nil {
		return nil, timing{}, err
	}
	if _, ok := s.jobs[service]; !ok {
		return nil, timing{}, fmt.Errorf("service: %q has never been placed", service)
	}
	if n <= 0 || n > len(live) {
		return nil, timing{}, fmt.Errorf("n: %d; must be 1..%d (the running instances of %q)", n, len(live), service)
	}
	job, err := s.register(service, s.shapes[service], len(live)-n)
	if err != nil {
		return nil, timing{}, err
	}
	took, err := s.evaluate(job, structs.EvalTriggerScaling)
	if err != nil {
		return nil, took, err
	}
	stopped, err := s.stoppedOf(live)
	if err != nil {
		return nil, took, err
	}
	if len(stopped) != n {
		//lint:ignore ST1005 Nomad is a name
		return nil, took, fmt.Errorf("Nomad stopped %d instances of %q, not %d", len(stopped), service, n)
	}
	ids := s.instancesOf(stopped)
	return ids, took, s.finish(stopped)
}

// stoppedOf are those of allocs the scheduler's plan has stopped (desired status stop/evict).
func (s *Sim) stoppedOf(allocs []*structs.Allocation) ([]*structs.Allocation, error) {
	var out []*structs.Allocation
	for _, a := range allocs {
		now, err := s.state.AllocByID(nil, a.ID)
		if err != nil {
			return nil, err
		}
		if now == nil || now.ServerTerminalStatus() {
			out = append(out, a)
		}
	}
	return out, nil
}

func (s *Sim) instancesOf(allocs []*structs.Allocation) []string {
	ids := make([]string, len(allocs))
	for i, a := range allocs {
		ids[i] = s.instance[a.ID]
	}
	return ids
}

// finish is the clients reporting stopped allocations complete, then their GC.
func (s *Sim) finish(stopped []*structs.Allocation) error {
	if err := s.clientUpdate(stopped, structs.AllocClientStatusComplete); err != nil {
		return err
	}
	return s.forget(stopped)
}

// stop: these instances are gone (moved away, or their host failed). Their allocations are
// stopped (desired status stop, then client status complete) and each service's count lowered
// to what runs, so that no later evaluation replaces them.
func (s *Sim) stop(instances []string) error {
	allocs, err := s.allocsOf(instances)
	if err != nil {
		return err
	}
	stopped := make([]*structs.Allocation, len(allocs))
	services := map[string]bool{}
	for i, a := range allocs {
		stopped[i] = a.Copy()
		stopped[i].DesiredStatus = structs.AllocDesiredStatusStop
		stopped[i].DesiredDescription = "stopped by the simulator"
		services[a.JobID] = true
	}
	if err := s.state.UpsertAllocs(structs.MsgTypeTestSetup, s.planner.NextIndex(), stopped); err != nil {
		return fmt.Errorf("stop allocations: %w", err)
	}
	if err := s.finish(stopped); err != nil {
		return err
	}
	return s.recount(services)
}

func (s *Sim) allocsOf(instances []string) ([]*structs.Allocation, error) {
	out := make([]*structs.Allocation, 0, len(instances))
	seen := map[string]bool{}
	for i, id := range instances {
		allocID, ok := s.allocOf[id]
		if !ok || seen[id] {
			return nil, fmt.Errorf("instances[%d]: %q is not a placed instance (or named twice)", i, id)
		}
		seen[id] = true
		a, err := s.state.AllocByID(nil, allocID)
		if err != nil || a == nil {
			return nil, fmt.Errorf("instances[%d]: allocation %s of %q: not in the state store (%v)", i, allocID, id, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// recount registers each service's job with its running count (no evaluation: nothing to do).
func (s *Sim) recount(services map[string]bool) error {
	for service := range services {
		live, err := s.liveAllocs(service)
		if err != nil {
			return err
		}
		if _, err := s.register(service, s.shapes[service], len(live)); err != nil {
			return err
		}
	}
	return nil
}
