// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
)

// A task refused at once reports before Nomad's log collector has opened its FIFOs (the
// collector opens them on its own schedule): the report waits for the reader instead of being
// dropped (CI once saw a refused task's stderr stay empty).
func TestReportWaitsForTheLogCollector(t *testing.T) {
	dir := t.TempDir()
	cfg := &drivers.TaskConfig{StdoutPath: filepath.Join(dir, "out.fifo"),
		StderrPath: filepath.Join(dir, "err.fifo")}
	got := make(chan string, 2)
	for _, p := range []string{cfg.StdoutPath, cfg.StderrPath} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		go func(p string) {
			time.Sleep(300 * time.Millisecond) // the collector comes late
			f, err := os.Open(p)
			if err != nil {
				got <- "open: " + err.Error()
				return
			}
			defer f.Close()
			b, _ := io.ReadAll(f)
			got <- filepath.Base(p) + ":" + string(b)
		}(p)
	}
	reportToFIFOs(cfg, "refused: kernel")
	seen := map[string]bool{}
	for i := 0; i < 2; i++ {
		select {
		case s := <-got:
			seen[s] = true
		case <-time.After(10 * time.Second):
			t.Fatal("a FIFO's reader never got its writer's end")
		}
	}
	if !seen["err.fifo:refused: kernel\n"] || !seen["out.fifo:"] {
		t.Fatalf("want the report on stderr and nothing on stdout, got %v", seen)
	}
}
