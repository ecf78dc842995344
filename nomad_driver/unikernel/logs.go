// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"errors"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/fluidvim/fluidvim/nomad_driver/qemu"
)

// A task's logs: the VNF's console and QEMU's stderr copied into the FIFOs Nomad hands the driver.

// reportToFIFOs opens both log FIFOs (if their reader is there), writes msg to stderr and
// closes them, so Nomad's log collector is not left waiting for a writer.
func reportToFIFOs(cfg *drivers.TaskConfig, msg string) {
	for _, p := range []string{cfg.StdoutPath, cfg.StderrPath} {
		if p == "" {
			continue
		}
		f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		if p == cfg.StderrPath {
			_, _ = f.WriteString(msg + "\n")
		}
		f.Close()
	}
}

// startLogs follows the console log into the task's stdout FIFO and QEMU's stderr into its
// stderr FIFO (both FIFOs must be opened, or Nomad waits for them at task exit).
func (d *Driver) startLogs(h *taskHandle, conOff, errOff int64) {
	cfg := h.taskConfig
	for _, p := range []struct {
		fifo, file string
		off        int64
	}{{cfg.StdoutPath, h.spec.ConsoleLog, conOff}, {cfg.StderrPath, qemu.StderrPath(h.runDir), errOff}} {
		if p.fifo == "" {
			continue
		}
		go func(fifoPath, file string, off int64) {
			var w *os.File
			for w == nil {
				f, err := os.OpenFile(fifoPath, os.O_WRONLY|syscall.O_NONBLOCK, 0)
				if err == nil {
					w = f
					break
				}
				if !errors.Is(err, syscall.ENXIO) { // ENXIO: no reader yet
					h.logger.Warn("cannot open log FIFO", "path", fifoPath, "error", err)
					return
				}
				select {
				case <-h.doneCh:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
			defer w.Close()
			var final func() string
			if fifoPath == cfg.StderrPath {
				final = func() string { h.mu.Lock(); defer h.mu.Unlock(); return h.failMsg }
			}
			follow(file, off, w, h.doneCh, final)
		}(p.fifo, p.file, p.off)
	}
}

// follow copies a growing file (the console log, QEMU's stderr) into a Nomad log FIFO until
// done is closed, then drains it.
func follow(path string, off int64, w io.Writer, done <-chan struct{}, final func() string) {
	buf := make([]byte, 32*1024)
	copyNew := func() {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		for {
			n, err := f.ReadAt(buf, off)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				off += int64(n)
			}
			if err != nil || n == 0 {
				return
			}
		}
	}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			copyNew()
			if final != nil {
				if msg := final(); msg != "" {
					_, _ = io.WriteString(w, msg+"\n")
				}
			}
			return
		case <-t.C:
			copyNew()
		}
	}
}
