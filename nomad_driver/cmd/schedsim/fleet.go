// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math/rand"

	"github.com/hashicorp/nomad/client/lib/idset"
	"github.com/hashicorp/nomad/client/lib/numalib"
	"github.com/hashicorp/nomad/client/lib/numalib/hw"
	"github.com/hashicorp/nomad/nomad/mock"
	"github.com/hashicorp/nomad/nomad/structs"
)

// What the simulated fleet and jobs look like to Nomad: nodes built from mock.Node (one
// datacenter, the default node pool, the plugin's `unikernel` driver healthy) sized like the
// simulator's hosts, and one service job per VNF service built from mock.MinJob.

const (
	driverName = "unikernel" // the plugin's driver name (unikernel.PluginName): jobs say driver = "unikernel"
	groupName  = "vnf"
	datacenter = "dc1"
	// Disk is not a dimension of the study: nodes get 1 TiB, an instance the 10 MB minimum
	// ephemeral disk, so that feasibility never turns on disk (binpack scores CPU and memory only).
	nodeDiskMB  = 1 << 20
	allocDiskMB = 10
)

// hostSpec is one host of a `start` request.
type hostSpec struct {
	ID       string `json:"id"`
	Cores    int    `json:"cores"`
	MHz      int    `json:"mhz"`
	MemoryMB int    `json:"memory_mb"`
}

func (h hostSpec) validate(i int) error {
	switch {
	case h.ID == "":
		return fmt.Errorf("hosts[%d].id: empty; give every host a unique id", i)
	case h.Cores <= 0:
		return fmt.Errorf("hosts[%d].cores: %d; must be > 0 (hardware threads)", i, h.Cores)
	case h.MHz <= 0:
		return fmt.Errorf("hosts[%d].mhz: %d; must be > 0 (per-core clock)", i, h.MHz)
	case h.MemoryMB <= 0:
		return fmt.Errorf("hosts[%d].memory_mb: %d; must be > 0", i, h.MemoryMB)
	}
	return nil
}

// idSource makes Nomad-style UUIDs from a seeded generator: Nomad shuffles the candidate nodes
// with a seed taken from the evaluation's ID, so seeded IDs make a run reproducible.
type idSource struct{ rng *rand.Rand }

func newIDSource(seed int64) *idSource { return &idSource{rng: rand.New(rand.NewSource(seed))} }

func (s *idSource) next() string {
	b := make([]byte, 16)
	s.rng.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// topology is what a Nomad 1.7+ client fingerprints: one socket, one NUMA node, `cores`
// usable cores at `mhz`; Nomad's CPU capacity (shares) is their sum, cores * mhz.
func topology(cores, mhz int) *numalib.Topology {
	cs := make([]numalib.Core, cores)
	for i := range cs {
		cs[i] = numalib.Core{ID: hw.CoreID(i), Grade: numalib.Performance, BaseSpeed: hw.MHz(mhz)}
	}
	t := &numalib.Topology{Distances: numalib.SLIT{[]numalib.Cost{10}}, Cores: cs}
	t.SetNodes(idset.From[hw.NodeID]([]hw.NodeID{0}))
	return t
}

// newNode is a ready, eligible client sized like h, nothing reserved.
func newNode(h hostSpec, id, secret string) *structs.Node {
	n := mock.Node()
	n.ID, n.SecretID, n.Name, n.Datacenter = id, secret, h.ID, datacenter
	n.Drivers = map[string]*structs.DriverInfo{driverName: {Detected: true, Healthy: true}}
	n.Attributes = map[string]string{
		"kernel.name": "linux", "arch": "x86_64", "nomad.version": "1.11.3",
		"driver." + driverName: "1",
	}
	n.Meta, n.Links, n.NodeClass = map[string]string{}, map[string]string{}, ""
	n.NodeResources.Processors.Topology = topology(h.Cores, h.MHz)
	n.NodeResources.Memory.MemoryMB = int64(h.MemoryMB)
	n.NodeResources.Disk.DiskMB = nodeDiskMB
	n.ReservedResources = &structs.NodeReservedResources{}
	n.NodeResources.Compatibility()
	_ = n.ComputeClass()
	return n
}

// serviceShape is what one instance of a service reserves (the task's `resources` block).
type serviceShape struct {
	CPUMHz   int
	MemoryMB int
}

// newJob is the service job of one VNF service: one task group "vnf" of one task on the
// unikernel driver; no update block (a count change starts no deployment) and no network.
func newJob(service string, shape serviceShape, count int) *structs.Job {
	job := mock.MinJob()
	job.ID, job.Name = service, service
	job.Datacenters = []string{datacenter}
	tg := job.TaskGroups[0]
	tg.Name, tg.Count = groupName, count
	tg.EphemeralDisk = &structs.EphemeralDisk{SizeMB: allocDiskMB}
	tg.Update = nil
	task := tg.Tasks[0]
	task.Name, task.Driver = groupName, driverName
	task.Config = map[string]any{"kernel": "/usr/share/fluidvim/fluidvim-vnf.elf"}
	task.Resources = &structs.Resources{CPU: shape.CPUMHz, MemoryMB: shape.MemoryMB}
	job.Update = structs.UpdateStrategy{}
	job.Canonicalize()
	return job
}

// withCount is a copy of job (objects read from the state store are never modified) with the
// task group's count set: what `nomad job scale` registers.
func withCount(job *structs.Job, count int) *structs.Job {
	j := job.Copy()
	j.TaskGroups[0].Count = count
	return j
}
