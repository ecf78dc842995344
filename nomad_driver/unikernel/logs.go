// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"bytes"
	"errors"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/fluidvim/fluidvim/nomad_driver/qemu"
)

// A task's logs: the VNF's console and QEMU's stderr copied into the FIFOs Nomad hands the driver.

// reportFIFOWait bounds how long a refused task's report waits for Nomad's log collector to
// open the read side of its FIFOs.
const reportFIFOWait = 3 * time.Second

// openLogFIFO opens a task's log FIFO for writing without blocking. Nomad's log collector opens
// its read side on its own schedule, after the task's directories exist (ENXIO until then), so
// this waits for it: until stop is closed or wait has passed (0: no limit).
func openLogFIFO(path string, stop <-chan struct{}, wait time.Duration) (*os.File, error) {
	var deadline <-chan time.Time
	if wait > 0 {
		deadline = time.After(wait)
	}
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil || !errors.Is(err, syscall.ENXIO) {
			return f, err
		}
		select {
		case <-stop:
			return nil, err
		case <-deadline:
			return nil, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// reportToFIFOs opens both log FIFOs (waiting a little for their reader: a task refused at once
// comes before it), writes msg to stderr and closes them, so Nomad's log collector is not left
// waiting for a writer.
func reportToFIFOs(cfg *drivers.TaskConfig, msg string) {
	for _, p := range []string{cfg.StdoutPath, cfg.StderrPath} {
		if p == "" {
			continue
		}
		f, err := openLogFIFO(p, nil, reportFIFOWait)
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
			w, err := openLogFIFO(fifoPath, h.doneCh, 0)
			if err != nil {
				if !errors.Is(err, syscall.ENXIO) { // ENXIO: the task ended before a reader came
					h.logger.Warn("cannot open log FIFO", "path", fifoPath, "error", err)
				}
				return
			}
			defer w.Close()
			var final func() string
			var filter func([]byte, int64) []byte
			if fifoPath == cfg.StderrPath {
				final = func() string { h.mu.Lock(); defer h.mu.Unlock(); return h.failMsg }
			} else {
				filter = h.consoleLine // the console: configuration errors maybe withheld
			}
			follow(file, off, w, h.doneCh, final, filter)
		}(p.fifo, p.file, p.off)
	}
}

// maxFilteredLine is the longest console line follow holds back for its filter (the VNF's
// console lines are at most 511 bytes: unikernel/src/serial.c kprintf_later).
const maxFilteredLine = 4096

// follow copies a growing file (the console log, QEMU's stderr) into a Nomad log FIFO until
// done is closed, then drains it. filter (nil: none) sees, and may rewrite, each whole line
// with its offset in the file; a line still being written is held back until it ends (or at
// done).
func follow(path string, off int64, w io.Writer, done <-chan struct{}, final func() string,
	filter func(line []byte, off int64) []byte) {
	buf := make([]byte, 32*1024)
	var held []byte // the start of a line not yet ended (filter only)
	heldOff := off
	write := func(b []byte) bool {
		_, err := w.Write(b)
		return err == nil
	}
	pass := func(chunk []byte) bool {
		if filter == nil {
			return write(chunk)
		}
		held = append(held, chunk...)
		for {
			i := bytes.IndexByte(held, '\n')
			if i < 0 && len(held) <= maxFilteredLine {
				return true
			}
			if i < 0 {
				i = len(held) - 1
			}
			if !write(filter(held[:i+1], heldOff)) {
				return false
			}
			heldOff += int64(i + 1)
			held = held[i+1:]
		}
	}
	copyNew := func() {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		for {
			n, err := f.ReadAt(buf, off)
			if n > 0 {
				ok := pass(buf[:n])
				if ok || filter != nil { // a filter holds what it could not write
					off += int64(n)
				}
				if !ok {
					return
				}
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
			if len(held) != 0 {
				write(filter(held, heldOff))
			}
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
