//go:build !linux

package spinetest

import "testing"

// SmallDisk needs Linux's user and mount namespaces; elsewhere the test is
// skipped.
func SmallDisk(t *testing.T, size int64, fn func(t *testing.T, dir string)) {
	t.Skip("a small disk is made with Linux namespaces")
}

// Fill is only used on a small disk, which needs Linux.
func Fill(t *testing.T, dir string) (free func()) {
	t.Skip("a small disk is made with Linux namespaces")
	return nil
}
