// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"sync"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/fluidvim/fluidvim/nomad_driver/spec"
)

// taskHandleVersion is the version of taskState stored in Nomad's task handle.
const taskHandleVersion = 1

// taskState is the driver state Nomad keeps for a task (TaskHandle.DriverState): enough to
// re-attach to a running QEMU after the plugin or the client restarts.
type taskState struct {
	TaskConfig  *drivers.TaskConfig
	Spec        spec.VNF
	Pid         int
	StartedAt   time.Time
	ClickConfig string
	Ready       map[string]any
}

// taskStore holds the handles of the tasks this plugin runs.
type taskStore struct {
	mu    sync.RWMutex
	store map[string]*taskHandle
}

func newTaskStore() *taskStore { return &taskStore{store: map[string]*taskHandle{}} }

func (ts *taskStore) Set(id string, h *taskHandle) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.store[id] = h
}

func (ts *taskStore) Get(id string) (*taskHandle, bool) {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	h, ok := ts.store[id]
	return h, ok
}

func (ts *taskStore) Delete(id string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.store, id)
}

func (ts *taskStore) All() []*taskHandle {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	out := make([]*taskHandle, 0, len(ts.store))
	for _, h := range ts.store {
		out = append(out, h)
	}
	return out
}
