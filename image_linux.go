package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
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
// stays resident is the code the gateway runs. Pages the process wrote are
// left alone (releaseFilePages): MADV_DONTNEED would discard their changes.
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
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return err
	}
	defer pagemap.Close()
	for _, m := range ms {
		if m.dev != image.dev || m.inode != image.inode || m.writable {
			continue
		}
		if err := releaseFilePages(pagemap, m.start, m.end); err != nil {
			return err
		}
	}
	return nil
}

// releaseFilePages drops the pages of [start, end), a private mapping of a
// file, that still hold the file's own bytes, read in pagemap (the
// process's /proc/self/pagemap). A page the process wrote is its own
// (anonymous) copy, and MADV_DONTNEED would put the file's bytes back in
// its place: a read-only mapping holds such pages where the dynamic
// loader applied relocations before making it read-only (the RELRO of a
// position-independent or externally linked binary), so they stay.
func releaseFilePages(pagemap io.ReaderAt, start, end uint64) error {
	page := uint64(os.Getpagesize())
	n := (end - start) / page
	from := uint64(0) // the first page of the run to drop
	drop := func(to uint64) error {
		if to > from {
			if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(start+from*page), uintptr((to-from)*page), syscall.MADV_DONTNEED); errno != 0 {
				return fmt.Errorf("madvise %x-%x: %w", start+from*page, start+to*page, errno)
			}
		}
		from = to + 1
		return nil
	}
	// Read a piece at a time: a large buffer allocated here could start a
	// collection, whose walk of the stacks reads back the function tables
	// just given back.
	var entries [512 * 8]byte
	for i := uint64(0); i < n; {
		chunk := entries[:8*min(n-i, 512)]
		if _, err := pagemap.ReadAt(chunk, int64((start/page+i)*8)); err != nil {
			return fmt.Errorf("pagemap %x-%x: %w", start, end, err)
		}
		for j := 0; j < len(chunk); j, i = j+8, i+1 {
			// Bits 63, 62, 61: present, swapped, a file's page (or shared).
			e := binary.LittleEndian.Uint64(chunk[j:])
			if own := e&(1<<62) != 0 || e&(1<<63) != 0 && e&(1<<61) == 0; own {
				if err := drop(i); err != nil {
					return err
				}
			}
		}
	}
	return drop(n)
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
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
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
