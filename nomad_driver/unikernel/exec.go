// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

// `nomad alloc exec` into a VNF. A unikernel has no shell and no processes: each command is a
// request on the VNF's control channel (contract/PROTOCOL.md §4), run by the plugin, which holds
// that channel. `console` (also `sh`, `bash`) reads commands line by line, with a prompt and
// echo on a terminal. Exit codes follow Nomad script checks: 0 ok, 1 warning (no free slot),
// 2 the VNF did not answer, 127 unknown command.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
)

const (
	execOK      = 0
	execWarn    = 1 // the VNF answers but can take no new session
	execFailed  = 2 // the VNF did not answer, or the command's arguments are wrong
	execUnknown = 127

	execRequestTimeout = 5 * time.Second
)

// execCommand is one command of `nomad alloc exec`.
type execCommand struct {
	name, usage, help string
	run               func(h *taskHandle, args []string, out, errOut io.Writer) int
}

var execCommands []execCommand

// consoleNames start the interactive console (what people type out of habit included).
var consoleNames = map[string]bool{"console": true, "sh": true, "/bin/sh": true, "bash": true,
	"/bin/bash": true}

func init() {
	execCommands = []execCommand{
		{"ping", "ping", "is the VNF answering: uptime, boot time, configured", execPing},
		{"stats", "stats [KEY]", "the VNF's counters as JSON (contract/PROTOCOL.md §4), or one key of them",
			execStats},
		{"slots", "slots", "session slots: free, used, total; exit 1 when none is free", execSlots},
		{"help", "help", "this list", execHelp},
	}
}

// commandLine is what a command line asks for: `sh -c "stats nics"` (how tools wrap commands)
// is `stats nics`; a shell name alone is the console.
func commandLine(cmd []string) (argv []string, console bool) {
	if len(cmd) >= 3 && consoleNames[cmd[0]] && cmd[1] == "-c" {
		cmd = strings.Fields(cmd[2])
	}
	return cmd, len(cmd) == 1 && consoleNames[cmd[0]]
}

func findExecCommand(name string) *execCommand {
	for i := range execCommands {
		if execCommands[i].name == name {
			return &execCommands[i]
		}
	}
	return nil
}

// runExec runs one command line on a task's VNF, writing to out; it returns the exit code.
func runExec(h *taskHandle, argv []string, out, errOut io.Writer) int {
	if len(argv) == 0 {
		fmt.Fprintln(errOut, "no command given; try: help")
		return execFailed
	}
	c := findExecCommand(argv[0])
	if c == nil {
		fmt.Fprintf(errOut, "%s: unknown command (a VNF has no shell or programs; commands: %s)\n",
			argv[0], commandNames())
		return execUnknown
	}
	return c.run(h, argv[1:], out, errOut)
}

func commandNames() string {
	names := make([]string, 0, len(execCommands)+1)
	for _, c := range execCommands {
		names = append(names, c.name)
	}
	return strings.Join(append(names, "console"), ", ")
}

func execRequest(h *taskHandle, op string, errOut io.Writer) (map[string]any, bool) {
	r, err := h.request(op, execRequestTimeout)
	if err != nil {
		fmt.Fprintf(errOut, "VNF %s did not answer %q: %v\n", h.spec.Name, op, err)
		return nil, false
	}
	return r, true
}

// jsonFloat is a number of a reply (the control client decodes numbers as json.Number); 0 if
// it is none.
func jsonFloat(v any) float64 {
	n, ok := v.(json.Number)
	if !ok {
		return 0
	}
	f, _ := n.Float64()
	return f
}

func noArgs(name string, args []string, errOut io.Writer) bool {
	if len(args) > 0 {
		fmt.Fprintf(errOut, "%s takes no arguments (got %q)\n", name, strings.Join(args, " "))
		return false
	}
	return true
}

func execPing(h *taskHandle, args []string, out, errOut io.Writer) int {
	if !noArgs("ping", args, errOut) {
		return execFailed
	}
	t0 := time.Now()
	r, ok := execRequest(h, "ping", errOut)
	if !ok {
		return execFailed
	}
	fmt.Fprintf(out, "pong from %s in %.2f ms: up %.1f s, booted in %v us, configured %v\n",
		h.spec.Name, float64(time.Since(t0).Microseconds())/1000, jsonFloat(r["uptime_us"])/1e6,
		r["boot_us"], r["configured"])
	return execOK
}

func execStats(h *taskHandle, args []string, out, errOut io.Writer) int {
	if len(args) > 1 {
		fmt.Fprintf(errOut, "usage: stats [KEY] (got %q)\n", strings.Join(args, " "))
		return execFailed
	}
	r, ok := execRequest(h, "stats", errOut)
	if !ok {
		return execFailed
	}
	var v any = r
	if len(args) == 1 {
		if v, ok = r[args[0]]; !ok {
			keys := make([]string, 0, len(r))
			for k := range r {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			fmt.Fprintf(errOut, "stats has no key %q (keys: %s)\n", args[0],
				strings.Join(keys, ", "))
			return execFailed
		}
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Fprintf(errOut, "%v\n", err)
		return execFailed
	}
	fmt.Fprintf(out, "%s\n", b)
	return execOK
}

func execSlots(h *taskHandle, args []string, out, errOut io.Writer) int {
	if !noArgs("slots", args, errOut) {
		return execFailed
	}
	r, ok := execRequest(h, "stats", errOut)
	if !ok {
		return execFailed
	}
	s, _ := r["slots"].(map[string]any)
	free := jsonFloat(s["free"])
	fmt.Fprintf(out, "%v free of %v session slots (%v used, %v packets of new sessions rejected)\n",
		s["free"], s["total"], s["used"], s["rejected"])
	if free <= 0 {
		return execWarn
	}
	return execOK
}

func execHelp(_ *taskHandle, _ []string, out, _ io.Writer) int {
	fmt.Fprintln(out, "A VNF has no shell: these commands are requests on its control channel.")
	for _, c := range execCommands {
		fmt.Fprintf(out, "  %-12s %s\n", c.usage, c.help)
	}
	fmt.Fprintf(out, "  %-12s %s\n", "console", "read commands line by line (also: sh); exit or Ctrl-D ends")
	fmt.Fprintln(out, "Exit codes: 0 ok, 1 no free session slot, 2 no answer or bad arguments, 127 unknown.")
	return execOK
}

// ExecTask runs one command (Nomad script checks use this): its output and exit code.
func (d *Driver) ExecTask(taskID string, cmd []string, timeout time.Duration) (*drivers.ExecTaskResult, error) {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	argv, console := commandLine(cmd)
	if console {
		return nil, fmt.Errorf("%s needs a terminal (nomad alloc exec -task NAME ALLOC %s); "+
			"one command at a time here: %s", cmd[0], cmd[0], commandNames())
	}
	var out, errOut strings.Builder
	code := runExec(h, argv, &out, &errOut)
	return &drivers.ExecTaskResult{Stdout: []byte(out.String()), Stderr: []byte(errOut.String()),
		ExitResult: &drivers.ExitResult{ExitCode: code}}, nil
}

// ExecTaskStreaming is `nomad alloc exec`: one command, or the console.
func (d *Driver) ExecTaskStreaming(ctx context.Context, taskID string, o *drivers.ExecOptions) (*drivers.ExitResult, error) {
	h, ok := d.tasks.Get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	go func() { // terminal sizes do not matter here; not reading them would stall stdin
		for {
			select {
			case _, ok := <-o.ResizeCh:
				if !ok {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	out, errOut := io.Writer(o.Stdout), io.Writer(o.Stderr)
	if o.Tty { // the local terminal is raw: lines end in CR LF
		out, errOut = crlf{o.Stdout}, crlf{o.Stderr}
	}
	argv, console := commandLine(o.Command)
	if console {
		return &drivers.ExitResult{ExitCode: runConsole(ctx, h, o.Stdin, out, errOut, o.Tty)}, nil
	}
	return &drivers.ExitResult{ExitCode: runExec(h, argv, out, errOut)}, nil
}

// crlf turns "\n" into "\r\n" for a raw terminal.
type crlf struct{ w io.Writer }

func (c crlf) Write(p []byte) (int, error) {
	if _, err := c.w.Write([]byte(strings.ReplaceAll(string(p), "\n", "\r\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// runConsole reads command lines until exit, end of input or ctx; on a terminal it prompts and
// echoes (the client's terminal is raw). Its exit code is the last command's.
func runConsole(ctx context.Context, h *taskHandle, in io.Reader, out, errOut io.Writer, tty bool) int {
	prompt := func() {
		if tty {
			fmt.Fprintf(out, "%s> ", h.spec.Name)
		}
	}
	if tty {
		fmt.Fprintf(out, "fluidvim VNF %s: commands %s; exit or Ctrl-D ends\n", h.spec.Name, commandNames())
	}
	// one line at a time, when the last command has finished: typed-ahead keys are echoed
	// after its output, as a shell's line editor does
	next, lines := make(chan struct{}), make(chan string)
	go func() {
		defer close(lines)
		var read func() (string, bool)
		if tty {
			read = ttyLines(in, out)
		} else {
			sc := bufio.NewScanner(in)
			read = func() (string, bool) {
				if !sc.Scan() {
					return "", false
				}
				return sc.Text(), true
			}
		}
		for {
			select {
			case <-next:
			case <-ctx.Done():
				return
			}
			l, ok := read()
			if !ok {
				return
			}
			select {
			case lines <- l:
			case <-ctx.Done():
				return
			}
		}
	}()
	code := execOK
	prompt()
	for {
		select {
		case next <- struct{}{}:
		case <-lines: // closed: the input ended
			return code
		case <-ctx.Done():
			return code
		}
		select {
		case <-ctx.Done():
			return code
		case l, ok := <-lines:
			if !ok {
				return code
			}
			argv := strings.Fields(l)
			switch {
			case len(argv) == 0:
			case argv[0] == "exit" || argv[0] == "quit":
				return code
			case consoleNames[argv[0]]:
				fmt.Fprintln(errOut, "already in the console")
			default:
				code = runExec(h, argv, out, errOut)
			}
			prompt()
		}
	}
}

// ttyLines is a minimal line discipline for a raw terminal: echo, backspace, Ctrl-C (drop the
// line), Ctrl-D on an empty line (end), escape sequences (arrow keys) ignored.
func ttyLines(in io.Reader, echo io.Writer) func() (string, bool) {
	r := bufio.NewReader(in)
	return func() (string, bool) {
		var line []rune
		for {
			c, _, err := r.ReadRune()
			if err != nil {
				return "", false
			}
			switch {
			case c == '\r' || c == '\n':
				fmt.Fprint(echo, "\n")
				return string(line), true
			case c == 0x7f || c == 0x08:
				if len(line) > 0 {
					line = line[:len(line)-1]
					fmt.Fprint(echo, "\b \b")
				}
			case c == 0x03:
				fmt.Fprint(echo, "^C\n")
				return "", true
			case c == 0x04:
				if len(line) == 0 {
					fmt.Fprint(echo, "\n")
					return "", false
				}
			case c == 0x1b: // ESC [ ... final byte in 0x40..0x7e
				if b, err := r.ReadByte(); err == nil && (b == '[' || b == 'O') {
					for {
						b, err := r.ReadByte()
						if err != nil || (b >= 0x40 && b <= 0x7e) {
							break
						}
					}
				}
			case c >= 0x20:
				line = append(line, c)
				fmt.Fprint(echo, string(c))
			}
		}
	}
}
