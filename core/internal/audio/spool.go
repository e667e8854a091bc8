package audio

import (
	"bytes"
	"errors"
	"io"
	"os"
)

// DefaultSpoolMemory is how much of an upload a Spool keeps in memory before
// it moves to a temporary file.
const DefaultSpoolMemory = 1 << 20

// ErrTooLarge is returned by Spool.Write past the spool's limit.
var ErrTooLarge = errors.New("audio upload is larger than the limit")

// Spool keeps an upload so that it can be read again from the start, once
// per upstream attempt: in memory up to a threshold, then in a temporary
// file. The file loses its name as soon as it is open, where the system
// allows it, so a process that dies mid-upload leaves no copy of it
// behind; elsewhere Close removes it. It is not safe for concurrent
// writes; readers made by Reader may run while no write happens.
type Spool struct {
	dir    string
	memMax int
	limit  int64

	mem  []byte
	file *os.File
	size int64
	// unlinked: the file's name was removed when it was made.
	unlinked bool

	// seconds is the file's duration once Seconds has read it (read says
	// so; ok whether its header told one).
	seconds      float64
	read, timeOK bool
}

// Seconds is the duration the spooled file's header tells (fileSeconds),
// read once for the file as written so far: a transcription asks for it up
// to three times (subtitles, verbose_json, the metering), and an MP3's is a
// count of all its frames.
func (s *Spool) Seconds() (float64, bool) {
	if !s.read {
		s.seconds, s.timeOK = fileSeconds(s, s.size)
		s.read = true
	}
	return s.seconds, s.timeOK
}

// NewSpool returns a spool that keeps up to memMax bytes in memory, spills
// the rest to a temporary file in dir (the system's when empty), and refuses
// more than limit bytes (no limit when limit <= 0).
func NewSpool(dir string, memMax int, limit int64) *Spool {
	return &Spool{dir: dir, memMax: memMax, limit: limit}
}

// Write appends p; past the limit it writes nothing and returns ErrTooLarge.
func (s *Spool) Write(p []byte) (int, error) {
	if s.limit > 0 && s.size+int64(len(p)) > s.limit {
		return 0, ErrTooLarge
	}
	s.read = false // the duration read is of a shorter file
	if s.file == nil && len(s.mem)+len(p) <= s.memMax {
		s.mem = append(s.mem, p...)
		s.size += int64(len(p))
		return len(p), nil
	}
	if s.file == nil {
		f, err := os.CreateTemp(s.dir, "switchboard-audio-*")
		if err != nil {
			return 0, err
		}
		s.file = f
		s.unlinked = os.Remove(f.Name()) == nil
	}
	n, err := s.file.Write(p)
	s.size += int64(n)
	return n, err
}

// Size is the number of bytes written.
func (s *Spool) Size() int64 { return s.size }

// Spilled reports whether the spool moved to a temporary file.
func (s *Spool) Spilled() bool { return s.file != nil }

// Reader returns a reader of everything written, from the start. Each call
// returns an independent reader.
func (s *Spool) Reader() io.Reader {
	head := bytes.NewReader(s.mem)
	if s.file == nil {
		return head
	}
	return io.MultiReader(head, io.NewSectionReader(s.file, 0, s.size-int64(len(s.mem))))
}

// ReadAt reads what was written from offset off, as io.ReaderAt does. It
// may run while no write happens.
func (s *Spool) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	n := 0
	if off < int64(len(s.mem)) {
		n = copy(p, s.mem[off:])
	}
	if n < len(p) && s.file != nil && off+int64(n) < s.size {
		end := min(int64(len(p)), s.size-off)
		m, err := s.file.ReadAt(p[n:end], off+int64(n)-int64(len(s.mem)))
		n += m
		if err != nil && err != io.EOF {
			return n, err
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

var _ io.ReaderAt = (*Spool)(nil)

// Close releases the memory and the temporary file.
func (s *Spool) Close() error {
	s.mem = nil
	if s.file == nil {
		return nil
	}
	name := s.file.Name()
	err := s.file.Close()
	s.file = nil
	if s.unlinked {
		return err
	}
	return errors.Join(err, os.Remove(name))
}
