package secrets

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LoadOrCreate returns the contents of the secret file at path, with
// trailing whitespace removed. If the file does not exist, it calls
// generate, creates the parent directory (mode 0700) if needed, writes the
// generated value followed by a newline to the file with mode 0600, and
// returns it with created set to true.
//
// The file is written atomically: the value goes to a temporary file in
// the same directory, which is then hard-linked to path. Linking fails if
// path already exists, so when several processes race, the first one to
// link wins and the others read and return its content (with created set
// to false). A reader therefore never observes a partially written file.
//
// An existing file that is empty (or only whitespace) is an error rather
// than being silently replaced.
func LoadOrCreate(path string, generate func() ([]byte, error)) (data []byte, created bool, err error) {
	data, err = Load(path)
	if err == nil {
		return data, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}

	data, err = generate()
	if err != nil {
		return nil, false, fmt.Errorf("secrets: generate %s: %w", path, err)
	}
	data = bytes.TrimRight(data, " \t\r\n")
	if len(data) == 0 {
		return nil, false, fmt.Errorf("secrets: generate %s: generated value is empty", path)
	}

	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("secrets: create directory: %w", err)
	}
	tmp, err := writeTemp(dir, filepath.Base(path), append(bytes.Clone(data), '\n'))
	if err != nil {
		return nil, false, err
	}
	defer os.Remove(tmp)

	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another process won the race; use its value.
			existing, rerr := Load(path)
			if rerr != nil {
				return nil, false, rerr
			}
			return existing, false, nil
		}
		return nil, false, fmt.Errorf("secrets: install %s: %w", path, err)
	}
	syncDir(dir)
	return data, true, nil
}

// readSecret reads path and trims trailing whitespace. The returned error
// wraps fs.ErrNotExist when the file does not exist.
// Load reads a secret file written by LoadOrCreate (or by an operator):
// trailing white space is dropped, and an empty file is an error.
func Load(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets: read %s: %w", path, err)
	}
	data := bytes.TrimRight(raw, " \t\r\n")
	if len(data) == 0 {
		return nil, fmt.Errorf("secrets: read %s: file is empty", path)
	}
	return data, nil
}

// writeTemp writes content to a new mode-0600 temporary file in dir,
// flushes it to stable storage, and returns its name.
func writeTemp(dir, base string, content []byte) (name string, err error) {
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("secrets: create temporary file: %w", err)
	}
	name = f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(name)
		}
	}()
	// CreateTemp already uses 0600, but be explicit about the final mode.
	if err := f.Chmod(0o600); err != nil {
		return "", fmt.Errorf("secrets: chmod temporary file: %w", err)
	}
	if _, err := f.Write(content); err != nil {
		return "", fmt.Errorf("secrets: write temporary file: %w", err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("secrets: sync temporary file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("secrets: close temporary file: %w", err)
	}
	return name, nil
}

// syncDir makes a new directory entry durable where the platform supports
// it. Failures are ignored: the file itself is already synced, and some
// platforms cannot sync directories.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}
