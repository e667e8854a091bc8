package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"syscall"
	"time"
)

// releaseAfter is how long after ready the executable's pages are released.
const releaseAfter = time.Second

// releaseExecutablePages unmaps the read-only pages of the executable (its
// code, read-only data and function tables) from the process, once it is
// ready. Starting touches code all over the binary, every package's
// initialisation and the setup paths, and the kernel maps a file's pages
// around each one touched (fault-around, 64 KiB), so a ready gateway held
// about 30 MiB of its 33 MiB image resident, three quarters of its memory at
// rest, most of it code that never runs again. Pages still in use come back
// on their next access from the page cache (a minor fault, no disk read:
// MADV_DONTNEED drops the process's mappings, not the cached file), so what
// stays resident is the code the gateway runs. Writable mappings are left
// alone: MADV_DONTNEED would discard their changes.
func releaseExecutablePages() error {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	// The executable is the file of the mapping holding this function's
	// code (a path could be ambiguous: replaced or deleted since exec).
	self := uint64(reflect.ValueOf(releaseExecutablePages).Pointer())
	ms := parseMaps(maps)
	var image *mapping
	for i := range ms {
		if ms[i].start <= self && self < ms[i].end {
			image = &ms[i]
			break
		}
	}
	if image == nil || image.inode == 0 {
		return fmt.Errorf("no file mapping holds the executable's code")
	}
	for _, m := range ms {
		if m.dev != image.dev || m.inode != image.inode || m.writable {
			continue
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), syscall.MADV_DONTNEED); errno != 0 {
			return fmt.Errorf("madvise %x-%x: %w", m.start, m.end, errno)
		}
	}
	return nil
}

// mapping is a line of /proc/self/maps.
type mapping struct {
	start, end uint64
	writable   bool
	dev        string
	inode      uint64
}

// parseMaps reads the lines of /proc/<pid>/maps ("start-end perms offset
// dev inode [path]"), skipping any it cannot read.
func parseMaps(b []byte) []mapping {
	var ms []mapping
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 5 {
			continue
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		inode, err3 := strconv.ParseUint(string(f[4]), 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || end <= start {
			continue
		}
		ms = append(ms, mapping{start: start, end: end, writable: bytes.IndexByte(f[1], 'w') >= 0, dev: string(f[3]), inode: inode})
	}
	return ms
}
