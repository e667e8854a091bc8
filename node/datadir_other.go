//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package node

import "os"

// On systems without flock the data directory is not locked.
func flock(*os.File) (bool, error) { return false, nil }

func funlock(*os.File) error { return nil }
