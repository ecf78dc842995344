// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"reflect"
	"testing"

	"github.com/hashicorp/nomad/helper/pluginutils/hclutils"

	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// The hclspec is the one place of the defaults: an empty plugin block decodes to what a Config
// made in Go gets (defaultConfig), and an empty task config to the shared limits' defaults.
func TestHCLSpecDefaultsAreTheGoDefaults(t *testing.T) {
	var got Config
	hclutils.NewConfigParser(configSpec).ParseHCL(t, "config {}", &got)
	if len(got.WarmPool) == 0 {
		got.WarmPool = nil // no blocks: decoded as an empty list
	}
	if want := defaultConfig(); !reflect.DeepEqual(&got, want) {
		t.Fatalf("empty plugin block decodes to %+v, Go's defaults are %+v", got, *want)
	}

	var pool Config
	hclutils.NewConfigParser(configSpec).ParseHCL(t, `config { warm_pool { kernel = "/k" } }`, &pool)
	if len(pool.WarmPool) != 1 {
		t.Fatalf("warm_pool: %+v", pool.WarmPool)
	}
	want := PoolConfig{Kernel: "/k", Size: defaultPoolSize}
	if err := want.validate(0); err != nil { // a Go-made block: checkShape fills the shape
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pool.WarmPool[0], want) {
		t.Fatalf("warm_pool block decodes to %+v, a Go-made one with the same fields is %+v",
			pool.WarmPool[0], want)
	}

	// memory_mb and vcpus decode unset (0): they come from the task's resources, else from
	// checkShape's defaults (resources.go)
	var tc TaskConfig
	hclutils.NewConfigParser(taskConfigSpec).ParseHCL(t, "config {}", &tc)
	if tc.MemoryMB != 0 || tc.Vcpus != 0 {
		t.Fatalf("empty task config decodes memory_mb %d vcpus %d, want unset", tc.MemoryMB, tc.Vcpus)
	}
	if err := tc.fromReservation(nil); err != nil {
		t.Fatal(err)
	}
	if err := checkShape(func(n string) string { return n }, &tc.MemoryMB, &tc.Vcpus, &tc.SessionSlots,
		&tc.FlowTimeoutMS); err != nil {
		t.Fatal(err)
	}
	if tc.MemoryMB != spec.DefaultMemoryMB || tc.Vcpus != spec.DefaultVcpus ||
		tc.SessionSlots != spec.DefaultSlots || tc.FlowTimeoutMS != spec.DefaultFlowTimeoutMS {
		t.Fatalf("empty task config decodes to %+v: not spec's defaults", tc)
	}
}
