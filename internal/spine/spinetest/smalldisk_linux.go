package spinetest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// smallDiskEnv names, in the process SmallDisk starts, the test it runs
// there.
const smallDiskEnv = "SWITCHBOARD_TEST_SMALL_DISK"

// SmallDisk runs fn on a disk of size bytes: a tmpfs mounted, for this test
// alone, in a process of its own. That process is the test binary again,
// running only t, in a user and mount namespace of its own, so no privilege
// is needed and nothing outside it sees the mount; what it logs and how it
// ends become t's. Writes past size fail with ENOSPC as on a full disk, and
// deleting files frees the space again. Where the kernel refuses user
// namespaces the test is skipped. t must be a top-level test.
func SmallDisk(t *testing.T, size int64, fn func(t *testing.T, dir string)) {
	t.Helper()
	if os.Getenv(smallDiskEnv) == t.Name() {
		dir := t.TempDir()
		// Mounts made here must not reach the namespace this one was
		// copied from.
		// Where user namespaces come without the right to mount (some
		// distributions restrict them), the test cannot run.
		if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
			t.Skipf("make the mounts private: %v", err)
		}
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
			t.Skipf("mount a tmpfs of %d bytes: %v", size, err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
		fn(t, dir)
		return
	}
	if strings.Contains(t.Name(), "/") {
		t.Fatal("SmallDisk runs top-level tests only")
	}
	args := []string{"-test.run=^" + regexp.QuoteMeta(t.Name()) + "$", "-test.count=1", "-test.v"}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		// The child ends, with its own report, before the parent's time
		// is up.
		left := time.Until(d) * 9 / 10
		args = append(args, "-test.timeout="+left.String())
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), smallDiskEnv+"="+t.Name())
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	// The parent-death signal belongs to the thread that started the
	// child: keep it.
	runtime.LockOSThread()
	out, err := cmd.CombinedOutput()
	runtime.UnlockOSThread()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Skipf("no user and mount namespaces here: %v", err)
	}
	t.Logf("on a %d-byte disk:\n%s", size, out)
	if err != nil {
		t.Fatalf("on a %d-byte disk: %v", size, err)
	}
	if strings.Contains(string(out), "--- SKIP: "+t.Name()) {
		t.Skip("skipped on its small disk")
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test did not run on its small disk")
	}
}

// Fill writes a file in dir until dir's disk is full, and returns the
// function that removes it, giving the room back.
func Fill(t *testing.T, dir string) (free func()) {
	t.Helper()
	name := filepath.Join(dir, "filler")
	f, err := os.Create(name)
	if err != nil {
		t.Fatalf("fill the disk: %v", err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill the disk: %v", err)
			}
			break
		}
	}
	if err := f.Close(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("fill the disk: %v", err)
	}
	return func() {
		if err := os.Remove(name); err != nil {
			t.Fatalf("give the disk's room back: %v", err)
		}
	}
}
