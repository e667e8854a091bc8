package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFile is the file in the data directory whose exclusive lock marks the
// process that owns the directory's embedded store.
const LockFile = "LOCK"

// ErrDataDirInUse is returned by Start when another process owns the data
// directory.
var ErrDataDirInUse = errors.New("data directory is in use")

// DataDirInUseError names the directory and, when it recorded it, the pid of
// the process holding it.
type DataDirInUseError struct {
	Dir string
	PID int // 0 when unknown
}

func (e *DataDirInUseError) Error() string {
	holder := "another switchboard process"
	if e.PID > 0 {
		holder += " (pid " + strconv.Itoa(e.PID) + ")"
	}
	return fmt.Sprintf("data directory %s is in use by %s; stop it first or give this process its own SWITCHBOARD_DATA_DIR", e.Dir, holder)
}

func (e *DataDirInUseError) Is(target error) bool { return target == ErrDataDirInUse }

// dirLock is a held lock on a data directory.
type dirLock struct{ f *os.File }

// lockDataDir takes the exclusive lock of dir (creating dir when needed) and
// records this process's pid in the lock file. The lock is the operating
// system's (flock), so it ends with the process however the process ends.
func lockDataDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	held, err := flock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("data directory lock %s: %w", path, err)
	}
	if held {
		pid := 0
		if b, err := os.ReadFile(path); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		f.Close()
		return nil, &DataDirInUseError{Dir: abs, PID: pid}
	}
	// The pid is informative only: the lock, not the file's content, decides.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// release gives the directory up; the lock file stays (removing it would
// race with a process that has just opened it).
func (l *dirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = funlock(l.f)
	_ = l.f.Close()
	l.f = nil
}
