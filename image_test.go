//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// executableResident is the resident size of the executable's read-only
// mappings, from /proc/self/smaps.
func executableResident(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	self := uint64(reflect.ValueOf(executableResident).Pointer())
	var image mapping
	var total uint64
	type entry struct {
		m   mapping
		rss uint64
	}
	var entries []entry
	for _, line := range bytes.Split(b, []byte("\n")) {
		if ms := parseMaps(line); len(ms) == 1 {
			entries = append(entries, entry{m: ms[0]})
			if ms[0].start <= self && self < ms[0].end {
				image = ms[0]
			}
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("Rss:")); ok && len(entries) > 0 {
			kb, err := strconv.ParseUint(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			require.NoError(t, err)
			entries[len(entries)-1].rss = kb << 10
		}
	}
	require.NotZero(t, image.inode, "no mapping holds the test's code")
	for _, e := range entries {
		if e.m.dev == image.dev && e.m.inode == image.inode && !e.m.writable {
			total += e.rss
		}
	}
	return total
}

// A ready process keeps resident only the executable pages it goes on
// using: most of what starting touched is given back.
func TestReleaseExecutablePages(t *testing.T) {
	before := executableResident(t)
	require.NoError(t, releaseExecutablePages())
	after := executableResident(t)
	t.Logf("executable resident: %d KiB before, %d KiB after", before>>10, after>>10)
	require.Greater(t, before, uint64(8<<20), "the test binary's initialisation touched less than expected")
	require.Less(t, after, before/2, "the executable's pages stayed resident")
}

func TestParseMaps(t *testing.T) {
	ms := parseMaps([]byte("00400000-01387000 r-xp 00000000 fe:00 10895750                           /usr/bin/switchboard\n" +
		"02528000-025b7000 rw-p 02128000 fe:00 10895750                           /usr/bin/switchboard (deleted)\n" +
		"7ffd1000-7ffd3000 r-xp 00000000 00:00 0                                  [vdso]\n" +
		"not a mapping\n"))
	require.Equal(t, []mapping{
		{start: 0x400000, end: 0x1387000, dev: "fe:00", inode: 10895750},
		{start: 0x2528000, end: 0x25b7000, writable: true, dev: "fe:00", inode: 10895750},
		{start: 0x7ffd1000, end: 0x7ffd3000, dev: "00:00"},
	}, ms)
}

// A page of a read-only private file mapping that the process wrote before
// making it read-only (the relocations a dynamic loader applies to a
// position-independent binary's RELRO) keeps its bytes: dropping it would
// put the file's back, and the binary would read unrelocated pointers.
func TestReleaseKeepsPagesTheProcessWrote(t *testing.T) {
	page := os.Getpagesize()
	path := filepath.Join(t.TempDir(), "image")
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("f"), 3*page), 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, 3*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE)
	require.NoError(t, err)
	defer syscall.Munmap(m)
	_ = m[0] + m[2*page] // the file's pages, resident
	copy(m[page:], "relocated")
	require.NoError(t, syscall.Mprotect(m, syscall.PROT_READ))

	pagemap, err := os.Open("/proc/self/pagemap")
	require.NoError(t, err)
	defer pagemap.Close()
	start := uint64(uintptr(unsafe.Pointer(&m[0])))
	require.NoError(t, releaseFilePages(pagemap, start, start+uint64(3*page)))
	assert.Equal(t, "relocated", string(m[page:page+9]), "the page the process wrote keeps its bytes")
	assert.Equal(t, "fff", string(m[0:3])+"", "the file's pages read the file again")
	assert.Equal(t, byte('f'), m[2*page])
}
