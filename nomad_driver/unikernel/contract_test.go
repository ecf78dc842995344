// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluidvim/fluidvim/nomad_driver/control"
	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// The warm-pool contract (contract/PROTOCOL.md §6): contract/vectors/pool.json, which the Python launch
// core's tests run too (tests/unit/test_pool_contract.py), against this driver's functions.

type nicVec struct {
	Tap string `json:"tap"`
	MAC string `json:"mac"`
}

type poolVectors struct {
	KernelIDLen    int     `json:"kernel_id_len"`
	RefillBackoffS float64 `json:"refill_backoff_s"`
	LaunchHistory  int     `json:"launch_history"`
	KernelIdentity []struct {
		Content string `json:"content"`
		ID      string `json:"id"`
	} `json:"kernel_identity"`
	PoolKey []struct {
		Backend       string `json:"backend"`
		KernelID      string `json:"kernel_id"`
		MemoryMB      int    `json:"memory_mb"`
		Vcpus         int    `json:"vcpus"`
		Nics          int    `json:"nics"`
		FlowTimeoutMS int    `json:"flow_timeout_ms"`
		Key           string `json:"key"`
	} `json:"pool_key"`
	Stale []struct {
		Key   string `json:"key"`
		Other string `json:"other"`
		Stale bool   `json:"stale"`
	} `json:"stale"`
	Transitions []struct {
		From  string  `json:"from"`
		Event string  `json:"event"`
		To    *string `json:"to"`
	} `json:"transitions"`
	Claim []struct {
		Name          string    `json:"name"`
		ShellNics     []nicVec  `json:"shell_nics"`
		MACs          []*string `json:"macs"`
		Taps          []*string `json:"taps"`
		ConfigureMACs []*string `json:"configure_macs"`
		ConfigureLine string    `json:"configure_line"`
		Nics          []nicVec  `json:"nics"`
	} `json:"claim"`
	QueuingDelay []struct {
		Name        string `json:"name"`
		ReadyShells int    `json:"ready_shells"`
		History     []struct {
			Kind    string  `json:"kind"`
			OK      bool    `json:"ok"`
			TotalMS float64 `json:"total_ms"`
		} `json:"history"`
		Window  int      `json:"window"`
		MS      *float64 `json:"ms"`
		Basis   string   `json:"basis"`
		Samples int      `json:"samples"`
	} `json:"queuing_delay"`
}

func loadPoolVectors(t *testing.T) poolVectors {
	t.Helper()
	b, err := os.ReadFile("../../contract/vectors/pool.json")
	if err != nil {
		t.Fatal(err)
	}
	var v poolVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// orEmpty maps JSON nulls (Python None: "the shell's") to "".
func orEmpty(v []*string) []string {
	if v == nil {
		return nil
	}
	out := make([]string, len(v))
	for i, s := range v {
		if s != nil {
			out[i] = *s
		}
	}
	return out
}

func TestPoolContractConstants(t *testing.T) {
	v := loadPoolVectors(t)
	if v.KernelIDLen != kernelIDLen || time.Duration(v.RefillBackoffS*float64(time.Second)) != refillBackoff ||
		v.LaunchHistory != spec.LaunchHistory {
		t.Errorf("kernel_id_len %d / refill_backoff_s %v / launch_history %d differ from %d / %v / %d",
			v.KernelIDLen, v.RefillBackoffS, v.LaunchHistory, kernelIDLen, refillBackoff, spec.LaunchHistory)
	}
}

func TestPoolContractKernelIdentity(t *testing.T) {
	v := loadPoolVectors(t)
	dir := t.TempDir()
	for i, c := range v.KernelIdentity {
		p := filepath.Join(dir, "k"+string(rune('a'+i))+".elf")
		if err := os.WriteFile(p, []byte(c.Content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := kernelID(p); got != c.ID {
			t.Errorf("kernelID(%q) = %q, want %q", c.Content, got, c.ID)
		}
	}
	// a rewritten file (other size) is hashed again; a missing one has no identity
	p := filepath.Join(dir, "rebuilt.elf")
	_ = os.WriteFile(p, []byte("build 1"), 0o644)
	first := kernelID(p)
	_ = os.WriteFile(p, []byte("build 22"), 0o644)
	if kernelID(p) == first || kernelID(filepath.Join(dir, "gone.elf")) != "" {
		t.Errorf("kernel identity does not follow the file")
	}
}

func TestPoolContractKeys(t *testing.T) {
	v := loadPoolVectors(t)
	for _, c := range v.PoolKey {
		if got := poolKey(c.Backend, c.KernelID, c.MemoryMB, c.Vcpus, c.Nics, c.FlowTimeoutMS); got != c.Key {
			t.Errorf("poolKey = %q, want %q", got, c.Key)
		}
	}
	for _, c := range v.Stale {
		if got := sameShapeOtherKernel(c.Key, c.Other); got != c.Stale {
			t.Errorf("sameShapeOtherKernel(%q, %q) = %v, want %v", c.Key, c.Other, got, c.Stale)
		}
	}
	// the key of a warm_pool block's shells is the key of a task of the same shape
	k := requireVNF(t)
	pc := PoolConfig{Kernel: k, Size: 1, Nics: 2}
	if err := pc.validate(0); err != nil {
		t.Fatal(err)
	}
	s := newShell(&taskHandle{}, pc.shape(), kernelID(k), pc.SessionSlots)
	if want := poolKey("qemu", kernelID(k), 32, 1, 2, 30000); s.key != want {
		t.Errorf("shell key %q, want %q", s.key, want)
	}
}

func TestPoolContractTransitions(t *testing.T) {
	v := loadPoolVectors(t)
	seen := map[[2]string]bool{}
	for _, c := range v.Transitions {
		seen[[2]string{c.From, c.Event}] = true
		got, err := transition(c.From, c.Event)
		switch {
		case c.To == nil && err == nil:
			t.Errorf("%s + %s = %s, want refused", c.From, c.Event, got)
		case c.To != nil && (err != nil || got != *c.To):
			t.Errorf("%s + %s = %q (%v), want %s", c.From, c.Event, got, err, *c.To)
		}
	}
	for k := range poolTransitions {
		if !seen[k] {
			t.Errorf("transition %v is not in the vectors", k)
		}
	}
}

func TestPoolContractClaim(t *testing.T) {
	v := loadPoolVectors(t)
	for _, c := range v.Claim {
		shell := make([]spec.NIC, len(c.ShellNics))
		for i, n := range c.ShellNics {
			shell[i] = spec.NIC{Tap: n.Tap, MAC: n.MAC}
		}
		cm, nics, err := claimNICs(shell, orEmpty(c.MACs), orEmpty(c.Taps))
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if !reflect.DeepEqual(cm, c.ConfigureMACs) {
			t.Errorf("%s: configure macs %v, want %v", c.Name, orEmpty(cm), orEmpty(c.ConfigureMACs))
		}
		got := make([]nicVec, len(nics))
		for i, n := range nics {
			got[i] = nicVec{n.Tap, n.MAC}
		}
		if !reflect.DeepEqual(got, c.Nics) {
			t.Errorf("%s: NICs %v, want %v", c.Name, got, c.Nics)
		}
		var req struct {
			Config string `json:"config"`
		}
		_ = json.Unmarshal([]byte(c.ConfigureLine), &req)
		fields := map[string]any{"config": req.Config, "slots": 64}
		if cm != nil {
			fields["macs"] = cm // what ConfigureMACs sends
		}
		line, err := control.EncodeRequest(7, "configure", fields)
		if err != nil || string(line) != c.ConfigureLine {
			t.Errorf("%s: configure line %q (%v), want %q", c.Name, line, err, c.ConfigureLine)
		}
	}
}

// TestPoolContractQueuingDelay runs each case through the driver: its launch history (recorded
// as launches happen, persisted in the run directory) and its pool's ready count.
func TestPoolContractQueuingDelay(t *testing.T) {
	v := loadPoolVectors(t)
	for _, c := range v.QueuingDelay {
		t.Run(c.Name, func(t *testing.T) {
			history := map[string][]float64{}
			for _, r := range c.History {
				if r.OK {
					history[r.Kind] = append(history[r.Kind], r.TotalMS)
				}
			}
			ms, basis, n, ok := queuingDelay(c.ReadyShells, history, c.Window)
			if basis != c.Basis || n != c.Samples || ok != (c.MS != nil) ||
				(ok && math.Abs(ms-*c.MS) > 1e-9) {
				t.Errorf("queuingDelay = %v %q %d %v, want %v %q %d", ms, basis, n, ok, c.MS, c.Basis, c.Samples)
			}
			if c.Window != spec.LaunchHistory {
				return // the driver's window is the default one
			}
			// a driver whose pool never starts: its ready list holds placeholders, counted only
			d := NewPlugin(hclog.NewNullLogger()).(*Driver)
			defer d.cancel()
			d.config.RunDir = t.TempDir()
			for i := len(c.History) - 1; i >= 0; i-- { // oldest first, as they happened
				if r := c.History[i]; r.OK { // a failed launch is never recorded
					d.recordLaunch(r.Kind, r.TotalMS)
				}
			}
			ready := make([]*shell, c.ReadyShells)
			d.pool.targets[poolShape{Kernel: "/k"}] = PoolConfig{Size: c.ReadyShells}
			d.pool.ready[poolShape{Kernel: "/k"}] = ready
			check := func(d *Driver) {
				t.Helper()
				ms, basis, ok := d.queuingDelay()
				if basis != c.Basis || ok != (c.MS != nil) || (ok && math.Abs(ms-*c.MS) > 1e-9) {
					t.Errorf("driver queuing delay %v %q %v, want %v %q", ms, basis, ok, c.MS, c.Basis)
				}
			}
			check(d)
			// a restarted plugin reads the same history back from the run directory
			d2 := NewPlugin(hclog.NewNullLogger()).(*Driver)
			defer d2.cancel()
			d2.config.RunDir = d.config.RunDir
			d2.pool.targets, d2.pool.ready = d.pool.targets, d.pool.ready
			check(d2)
		})
	}
}

func TestPluginVersionIsThePackageVersion(t *testing.T) {
	b, err := os.ReadFile("../../contract/vectors/limits.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Version == "" {
		t.Fatalf("limits.json: %v", err)
	}
	if PluginVersion != doc.Version {
		t.Errorf("PluginVersion %q, fluidvim/__init__.py says %q", PluginVersion, doc.Version)
	}
}
