// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// The warm pool's contract, without processes or timers: the plugin's warm_pool blocks and their
// shapes, the kernel identity and the pool key, the shell state machine, the NICs of a claim and
// the queuing-delay estimate (contract/PROTOCOL.md §6, vnf/pool.py; checked against
// contract/vectors/pool.json by contract_test.go). Its lifecycle (booting, adopting, claiming and
// destroying shells, the refill goroutine) is pool.go.

// PoolConfig is one `warm_pool { kernel = "..." size = 2 }` block of the plugin config.
type PoolConfig struct {
	Kernel        string `codec:"kernel"`
	Size          int    `codec:"size"`
	MemoryMB      int    `codec:"memory_mb"`
	Vcpus         int    `codec:"vcpus"`
	Nics          int    `codec:"nics"`
	SessionSlots  int    `codec:"session_slots"`
	FlowTimeoutMS int    `codec:"flow_timeout_ms"`
}

// poolShape is what a task must match to take a shell (manager.pool_key, plus the boot-time
// command line values a `configure` cannot change).
type poolShape struct {
	Kernel        string
	MemoryMB      int
	Vcpus         int
	Nics          int
	FlowTimeoutMS int
}

func (p *PoolConfig) shape() poolShape {
	return poolShape{Kernel: filepath.Clean(p.Kernel), MemoryMB: p.MemoryMB, Vcpus: p.Vcpus,
		Nics: p.Nics, FlowTimeoutMS: p.FlowTimeoutMS}
}

func (s poolShape) String() string {
	return fmt.Sprintf("%s/m%d/c%d/n%d/t%d", s.Kernel, s.MemoryMB, s.Vcpus, s.Nics, s.FlowTimeoutMS)
}

// validate fills defaults; errors name warm_pool[i].<field>.
func (p *PoolConfig) validate(i int) error {
	f := func(name string) string { return fmt.Sprintf("warm_pool[%d].%s", i, name) }
	if p.Kernel == "" {
		return fieldErr(f("kernel"), "required: the VNF kernel (absolute path) this pool boots")
	}
	if !filepath.IsAbs(p.Kernel) {
		return fieldErr(f("kernel"), "%q must be an absolute path", p.Kernel)
	}
	if p.Size < 0 || p.Size > spec.MaxPoolSize {
		return fieldErr(f("size"), "%d is out of range 0..%d", p.Size, spec.MaxPoolSize)
	}
	if err := checkShape(f, &p.MemoryMB, &p.Vcpus, &p.SessionSlots, &p.FlowTimeoutMS); err != nil {
		return err
	}
	if p.Nics < 0 || p.Nics > spec.MaxNics {
		return fieldErr(f("nics"), "%d is out of range 0..%d", p.Nics, spec.MaxNics)
	}
	return nil
}

// ---- the warm-pool contract (contract/PROTOCOL.md §6; vnf/pool.py; vectors contract/vectors/pool.json) ----

const (
	kernelIDLen     = 12     // hex digits of the kernel file's sha256
	poolBackendName = "qemu" // the pool key's backend: this driver runs microvm only
)

type kernelStat struct {
	path        string
	size, mtime int64
}

// kernelIDs caches kernel identities by (path, size, mtime): a claim costs a stat, a rebuilt or
// replaced file is hashed again.
var kernelIDs sync.Map

// kernelID is the kernel identity (§6.1): the first 12 hex digits of the sha256 of the file's
// content; "" when the file cannot be read. A shell serves only tasks of the content it booted.
func kernelID(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return ""
	}
	abs, _ := filepath.Abs(path)
	k := kernelStat{abs, st.Size(), st.ModTime().UnixNano()}
	if v, ok := kernelIDs.Load(k); ok {
		return v.(string)
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	id := hex.EncodeToString(h.Sum(nil))[:kernelIDLen]
	kernelIDs.Store(k, id)
	return id
}

// poolKey is §6.2's key: what a launch must match to take a shell (fixed at boot, not changed by
// `configure`; session slots are not in it).
func poolKey(backend, kernelID string, memoryMB, vcpus, nics, flowTimeoutMS int) string {
	return fmt.Sprintf("%s/%s/m%d/c%d/n%d/t%d", backend, kernelID, memoryMB, vcpus, nics, flowTimeoutMS)
}

// sameShapeOtherKernel: other is key's shape booted from another kernel (a stale shell).
func sameShapeOtherKernel(key, other string) bool {
	a, b := strings.Split(key, "/"), strings.Split(other, "/")
	if len(a) != 6 || len(b) != 6 || a[0] != b[0] || a[1] == b[1] {
		return false
	}
	return strings.Join(a[2:], "/") == strings.Join(b[2:], "/")
}

// Shell states and the events that move them (§6.3).
const (
	stBooting = "booting"
	stReady   = "ready"
	stClaimed = "claimed"
	stRunning = "running"
	stRemoved = "removed"
)

var poolTransitions = map[[2]string]string{
	{stBooting, "booted"}:          stReady,
	{stBooting, "failed"}:          stRemoved,
	{stReady, "claim"}:             stClaimed,
	{stReady, "died"}:              stRemoved,
	{stReady, "kernel_changed"}:    stRemoved,
	{stReady, "surplus"}:           stRemoved,
	{stClaimed, "configured"}:      stRunning,
	{stClaimed, "config_rejected"}: stReady,
	{stClaimed, "tap_taken"}:       stReady,
	{stClaimed, "failed"}:          stRemoved,
}

// transition is the state after event, or an error when a shell in state cannot take it.
func transition(state, event string) (string, error) {
	if to, ok := poolTransitions[[2]string{state, event}]; ok {
		return to, nil
	}
	return "", fmt.Errorf("a shell that is %s cannot take event %q", state, event)
}

// claimNICs is §6.4: the `macs` of the claim's configure (nil: leave the field out) and the NICs
// the VNF has afterwards, for a shell's NICs claimed with per-NIC macs/taps ("" = the shell's).
func claimNICs(shell []spec.NIC, macs, taps []string) ([]*string, []spec.NIC, error) {
	n := len(shell)
	if macs == nil {
		macs = make([]string, n)
	}
	if taps == nil {
		taps = make([]string, n)
	}
	if len(macs) != n || len(taps) != n {
		return nil, nil, fmt.Errorf("%d NICs but %d MACs and %d tap names", n, len(macs), len(taps))
	}
	var cm []*string
	out := make([]spec.NIC, n)
	for i, nic := range shell {
		out[i] = nic
		if taps[i] != "" {
			out[i].Tap = taps[i]
		}
		if macs[i] != "" {
			out[i].MAC = macs[i]
			if cm == nil {
				cm = make([]*string, n)
			}
			m := macs[i]
			cm[i] = &m
		}
	}
	return cm, out, nil
}

// median is fluidvim.common.measure.median: the mean of the two middle values for an even count.
func median(v []float64) (float64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}

// queuingDelay is §6.5: history[kind] holds successful launch times (ms), newest first; the next
// launch is warm when a shell is ready, else cold, and costs the median of the last window
// launches of that kind (ok false: none yet).
func queuingDelay(readyShells int, history map[string][]float64, window int) (ms float64, basis string, samples int, ok bool) {
	basis = "cold"
	if readyShells > 0 {
		basis = "warm"
	}
	s := history[basis]
	if len(s) > window {
		s = s[:window]
	}
	ms, ok = median(s)
	return ms, basis, len(s), ok
}
