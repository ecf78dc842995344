// Copyright 2026 The fluidvim Authors
// SPDX-License-Identifier: Apache-2.0

package unikernel

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
	dtestutil "github.com/hashicorp/nomad/plugins/drivers/testutils"
)

// The confinement and the withheld messages (paths.go) with real VNFs behind the driver harness:
// what StartTask returns and what the task's logs (the console on stdout, stderr) receive.

// taskLog is the task's stdout or stderr as Nomad's log collector wrote it.
func taskLog(task *drivers.TaskConfig, kind string) string {
	b, _ := os.ReadFile(filepath.Join(task.TaskDir().LogDir, task.Name+"."+kind+".0"))
	return string(b)
}

// waitLog waits until the task's log holds want (the collector writes asynchronously).
func waitLog(t *testing.T, task *drivers.TaskConfig, kind, want string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		text := taskLog(task, kind)
		if strings.Contains(text, want) || time.Now().After(deadline) {
			if !strings.Contains(text, want) {
				t.Fatalf("%s's %s never showed %q:\n%s", task.Name, kind, want, text)
			}
			return text
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	out.Close()
}

// withImages is a harness whose plugin config allows one image directory; it holds a marker
// click file.
func withImages(t *testing.T, runDir string, pools []PoolConfig) (*dtestutil.DriverHarness, *Driver, string) {
	t.Helper()
	images := t.TempDir()
	write(t, filepath.Join(images, "secret.click"), marker+" -> Discard;\n")
	h, d := newHarnessWith(t, runDir, pools, func(c *Config) { c.ImagePaths = []string{images} })
	return h, d, images
}

func TestConfinedFilesColdLaunch(t *testing.T) {
	k := requireVNF(t)
	runDir := poolRunDir(t)
	h, d, images := withImages(t, runDir, nil)
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret.click"), marker+" -> Discard;\n")

	// refused before anything is created: no run dir entry, no QEMU
	for _, c := range []struct {
		field string
		tc    TaskConfig
	}{
		{"kernel", TaskConfig{Kernel: "/etc/shadow", NICs: []string{""}}},
		{"click_file", TaskConfig{Kernel: k, NICs: []string{""}, ClickFile: "../../../../../../../../etc/shadow"}},
		{"click_file", TaskConfig{Kernel: k, NICs: []string{""}, ClickFile: filepath.Join(outside, "secret.click")}},
	} {
		task := newTask(t, h, "refused", &c.tc)
		_, _, err := h.StartTask(task)
		if err == nil || !strings.Contains(err.Error(), "invalid config: "+c.field+": ") ||
			!strings.Contains(err.Error(), "image_paths") || strings.Contains(err.Error(), marker) {
			t.Fatalf("%+v: want a refusal naming %s, got %v", c.tc, c.field, err)
		}
		if ents, _ := os.ReadDir(runDir); len(ents) != 0 || len(qemuUnder(runDir)) != 0 {
			t.Fatalf("%+v: something was created for a refused task: %v", c.tc, ents)
		}
		waitLog(t, task, "stderr", "invalid config: "+c.field)
	}

	// allowlisted: read and sent; the VNF rejects it; its message is withheld everywhere
	task := newTask(t, h, "listed", &TaskConfig{Kernel: k, NICs: []string{""},
		ClickFile: filepath.Join(images, "secret.click")})
	_, _, err := h.StartTask(task) // (through gRPC: the FieldError arrives as its text)
	if err == nil || !strings.Contains(err.Error(), "invalid config: click_file: the VNF rejected the "+
		"configuration: config error at line 1, column 1 (the VNF's message is withheld") {
		t.Fatalf("want a withheld click_file rejection, got %v", err)
	}
	// stderr ends with the failure; the console (stdout) of a failed cold launch is removed with
	// its run dir, what the follower copied before may or may not hold the VNF's error line
	stderr := waitLog(t, task, "stderr", "click_file: the VNF rejected the configuration: config error "+
		"at line 1, column 1 (the VNF's message is withheld")
	stdout := taskLog(task, "stdout")
	for what, text := range map[string]string{"error": err.Error(), "stdout": stdout, "stderr": stderr} {
		if strings.Contains(text, marker) {
			t.Errorf("the allowlisted file's content reached the task's %s:\n%s", what, text)
		}
	}

	// the job's own file: the VNF's message is shown (so the places above do carry it)
	task = newTask(t, h, "own", &TaskConfig{Kernel: k, NICs: []string{""}, ClickFile: "local/own.click"})
	write(t, filepath.Join(task.TaskDir().LocalDir, "own.click"), "OWNTOKEN -> Discard;\n")
	if _, _, err := h.StartTask(task); err == nil || !strings.Contains(err.Error(), "unknown element class 'OWNTOKEN'") {
		t.Fatalf("want the VNF's message on the job's own file, got %v", err)
	}
	waitLog(t, task, "stderr", "click_file: the VNF rejected the configuration: config: unknown element "+
		"class 'OWNTOKEN'")

	// a kernel the job copied into its task dir boots
	task = newTask(t, h, "ownkernel", &TaskConfig{Kernel: "local/vnf.elf", NICs: []string{""},
		ClickConfig: "FromDevice(0) -> Discard;"})
	copyFile(t, k, filepath.Join(task.TaskDir().LocalDir, "vnf.elf"))
	_, state := startTask(t, h, task)
	if want, _ := filepath.EvalSymlinks(filepath.Join(task.TaskDir().LocalDir, "vnf.elf")); state.Spec.Kernel != want {
		t.Errorf("booted %s, want the task's copy %s", state.Spec.Kernel, want)
	}
	stopDestroy(t, h, task.ID)
	_ = d
}

func TestConfinedFilesWarmLaunch(t *testing.T) {
	k := requireVNF(t)
	runDir := poolRunDir(t)
	pc := PoolConfig{Kernel: k, Size: 1, Nics: 1}
	h, d, images := withImages(t, runDir, []PoolConfig{pc})
	_ = pc.validate(0)
	s := waitShell(t, d, pc.shape(), "")

	// an allowlisted file rejected on the shell: withheld; the shell goes back to the pool
	listed := newTask(t, h, "listed", &TaskConfig{Kernel: k, NICs: []string{""},
		ClickFile: filepath.Join(images, "secret.click")})
	_, _, err := h.StartTask(listed)
	if err == nil || !strings.Contains(err.Error(), "config error at line 1, column 1 (the VNF's message is withheld") ||
		strings.Contains(err.Error(), marker) {
		t.Fatalf("want a withheld click_file rejection, got %v", err)
	}
	if stderr := waitLog(t, listed, "stderr", "withheld"); strings.Contains(stderr, marker) {
		t.Errorf("the allowlisted file's content reached the task's stderr:\n%s", stderr)
	}
	// a job's own inline config rejected on the same shell: shown to that job
	own := newTask(t, h, "own", &TaskConfig{Kernel: k, NICs: []string{""}, ClickConfig: "OWNTOKEN -> Discard;"})
	if _, _, err := h.StartTask(own); err == nil || !strings.Contains(err.Error(), "'OWNTOKEN'") {
		t.Fatalf("want the VNF's message on the job's own config, got %v", err)
	}
	// the next job takes the same shell: the console it is shown starts at the shell's boot,
	// and neither earlier job's configuration appears in it
	good := newTask(t, h, "good", &TaskConfig{Kernel: k, NICs: []string{""}, ClickConfig: "FromDevice(0) -> Discard;"})
	_, state := startTask(t, h, good)
	if state.Spec.UUID != s.h.spec.UUID {
		t.Fatalf("the good task did not take the shell (%s, shell %s)", state.Spec.UUID, s.h.spec.UUID)
	}
	stdout := waitLog(t, good, "stdout", "configure: ok")
	stopDestroy(t, h, good.ID)
	if n := strings.Count(stdout, "(the VNF's message is withheld"); n != 2 {
		t.Errorf("want both earlier rejections withheld in the next job's console, got %d:\n%s", n, stdout)
	}
	for _, tok := range []string{marker, "OWNTOKEN"} {
		if strings.Contains(stdout, tok) {
			t.Errorf("an earlier job's configuration (%s) reached the next job's console:\n%s", tok, stdout)
		}
	}
}
