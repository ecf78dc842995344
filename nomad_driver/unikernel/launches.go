// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// The recent launch times behind the fingerprint's queuing delay (contract/PROTOCOL.md §6.5).

// launchHistoryFile keeps the recent successful launch times in the run directory, so the
// queuing delay survives a plugin restart as the Python core's launches table does (§6.5).
const launchHistoryFile = "launches.json"

// history returns the launch times by kind, newest first, loading them from the run directory
// the first time (d.launchMu held).
func (d *Driver) history() map[string][]float64 {
	if d.launchTimes == nil {
		d.launchTimes = map[string][]float64{}
		d.mu.RLock()
		runDir := d.config.RunDir
		d.mu.RUnlock()
		if b, err := os.ReadFile(filepath.Join(runDir, launchHistoryFile)); err == nil {
			_ = json.Unmarshal(b, &d.launchTimes)
		}
	}
	return d.launchTimes
}

// recordLaunch adds a successful launch's total time (ms; StartTask to configured).
func (d *Driver) recordLaunch(kind string, ms float64) {
	d.launchMu.Lock()
	defer d.launchMu.Unlock()
	h := d.history()
	l := append([]float64{ms}, h[kind]...)
	if len(l) > spec.LaunchHistory {
		l = l[:spec.LaunchHistory]
	}
	h[kind] = l
	d.mu.RLock()
	runDir := d.config.RunDir
	d.mu.RUnlock()
	if b, err := json.Marshal(h); err == nil {
		tmp := filepath.Join(runDir, "."+launchHistoryFile+".tmp")
		if os.WriteFile(tmp, b, 0o640) == nil {
			_ = os.Rename(tmp, filepath.Join(runDir, launchHistoryFile))
		}
	}
}

// medianLaunch is the median of the recent launches of one kind.
func (d *Driver) medianLaunch(kind string) (float64, bool) {
	d.launchMu.Lock()
	defer d.launchMu.Unlock()
	return median(d.history()[kind])
}

// queuingDelay is what the next launch costs (contract/PROTOCOL.md §6.5, manager.queuing_delay):
// the median recent warm launch while any shell is ready, else the median cold one; none (ok
// false) while there is no launch of that kind yet.
func (d *Driver) queuingDelay() (float64, string, bool) {
	ready, _, _ := d.pool.counts()
	d.launchMu.Lock()
	defer d.launchMu.Unlock()
	ms, basis, _, ok := queuingDelay(ready, d.history(), spec.LaunchHistory)
	return ms, basis, ok
}
