package audio

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"math/bits"
)

// fileSeconds is the duration of an uploaded audio file as its container
// tells it, read without decoding the audio: WAV (the size of its data over
// its format's rate), FLAC (STREAMINFO's count of samples), Ogg Opus and
// Vorbis (the granule position of the stream's last page), MP4 and M4A (the
// movie header's duration), WebM and Matroska (the Segment Info's Duration)
// and MP3 (its frames, counted). ok is false for any other format, and for
// a header that does not hold together.
func fileSeconds(r io.ReaderAt, size int64) (seconds float64, ok bool) {
	var head [12]byte
	if n, _ := r.ReadAt(head[:], 0); n < len(head) {
		return 0, false
	}
	switch {
	case string(head[:4]) == "RIFF" && string(head[8:12]) == "WAVE":
		seconds, ok = wavSeconds(r, size)
	case string(head[:4]) == "OggS":
		seconds, ok = oggSeconds(r, size)
	case string(head[4:8]) == "ftyp":
		seconds, ok = mp4Seconds(r, size)
	case binary.BigEndian.Uint32(head[:4]) == ebmlIDHeader:
		seconds, ok = webmSeconds(r, size)
	default:
		start := id3Size(head[:10])
		var magic [4]byte
		if n, _ := r.ReadAt(magic[:], start); n < len(magic) {
			return 0, false
		}
		if string(magic[:]) == "fLaC" {
			seconds, ok = flacSeconds(r, start+4)
		} else {
			seconds, ok = mp3Seconds(r, start, size)
		}
	}
	if !ok || seconds <= 0 || math.IsInf(seconds, 0) || math.IsNaN(seconds) {
		return 0, false
	}
	return seconds, true
}

// id3Size is the size of the ID3v2 tag that head begins with, 0 when it
// begins with none.
func id3Size(head []byte) int64 {
	if len(head) < 10 || string(head[:3]) != "ID3" {
		return 0
	}
	var n int64
	for _, b := range head[6:10] { // syncsafe: 7 bits a byte
		if b&0x80 != 0 {
			return 0
		}
		n = n<<7 | int64(b)
	}
	n += 10
	if head[5]&0x10 != 0 { // a footer follows
		n += 10
	}
	return n
}

// maxHeaderEntries bounds the chunks of a WAV and the boxes of one MP4
// level walked before giving up: real files have a handful, and a crafted
// one of millions of empty chunks would otherwise cost a read each.
const maxHeaderEntries = 64

// WAV format tags whose data is whole blocks of uncompressed samples: PCM,
// IEEE float, A-law, µ-law, and the extensible header (which holds those).
var wavUncompressed = map[uint16]bool{1: true, 3: true, 6: true, 7: true, 0xFFFE: true}

// wavSeconds walks a RIFF WAVE file's chunks. Uncompressed data lasts its
// whole blocks over the sample rate; compressed data, its fact chunk's
// count of samples over the sample rate, else its size over the average
// byte rate of its format. A data chunk whose size is unknown (0 or
// 0xFFFFFFFF, as streaming writers leave it) or larger than the file runs
// to the end of the file.
func wavSeconds(r io.ReaderAt, size int64) (float64, bool) {
	var (
		hdr                         [8]byte
		format, channels, block     uint16
		rate, byteRate, factSamples uint32
		haveFmt                     bool
	)
	for off, i := int64(12), 0; off+8 <= size && i < maxHeaderEntries; i++ {
		if n, _ := r.ReadAt(hdr[:], off); n < len(hdr) {
			return 0, false
		}
		id, n, body := string(hdr[:4]), int64(binary.LittleEndian.Uint32(hdr[4:])), off+8
		switch id {
		case "fmt ":
			var f [16]byte
			if n < int64(len(f)) {
				return 0, false
			}
			if m, _ := r.ReadAt(f[:], body); m < len(f) {
				return 0, false
			}
			format, channels = binary.LittleEndian.Uint16(f[0:]), binary.LittleEndian.Uint16(f[2:])
			rate, byteRate = binary.LittleEndian.Uint32(f[4:]), binary.LittleEndian.Uint32(f[8:])
			block, haveFmt = binary.LittleEndian.Uint16(f[12:]), true
		case "fact":
			var f [4]byte
			if n >= 4 {
				if m, _ := r.ReadAt(f[:], body); m == len(f) {
					factSamples = binary.LittleEndian.Uint32(f[:])
				}
			}
		case "data":
			if !haveFmt || channels == 0 || rate == 0 || byteRate == 0 {
				return 0, false
			}
			if avail := size - body; n == 0 || n == 0xFFFFFFFF || n > avail {
				n = avail
			}
			switch {
			case wavUncompressed[format]:
				if block == 0 || byteRate != rate*uint32(block) {
					return 0, false
				}
				return float64(n/int64(block)) / float64(rate), true
			case factSamples > 0:
				return float64(factSamples) / float64(rate), true
			default:
				return float64(n) / float64(byteRate), true
			}
		}
		off = body + n + n&1 // chunks are padded to an even size
	}
	return 0, false
}

// flacSeconds reads the STREAMINFO block that opens FLAC's metadata (at
// off, just after "fLaC"): its total of samples over its sample rate. A
// total of 0 means unknown.
func flacSeconds(r io.ReaderAt, off int64) (float64, bool) {
	var b [4 + 34]byte
	if n, _ := r.ReadAt(b[:], off); n < len(b) {
		return 0, false
	}
	if b[0]&0x7F != 0 || int(b[1])<<16|int(b[2])<<8|int(b[3]) != 34 {
		return 0, false
	}
	x := binary.BigEndian.Uint64(b[4+10:])
	rate, total := x>>44, x&(1<<36-1)
	if rate == 0 || total == 0 {
		return 0, false
	}
	return float64(total) / float64(rate), true
}

// maxOggPage is the largest Ogg page: a 27-byte header, 255 lacing values
// and 255 segments of 255 bytes.
const maxOggPage = 27 + 255 + 255*255

// oggSeconds reads the codec from an Ogg file's first page (Opus or
// Vorbis) and the granule position of the last page of the same stream:
// Opus counts 48 kHz samples from which its pre-skip is taken off, Vorbis
// samples at the rate of its identification header.
func oggSeconds(r io.ReaderAt, size int64) (float64, bool) {
	first := make([]byte, min(size, maxOggPage))
	if n, _ := r.ReadAt(first, 0); n < 27 {
		return 0, false
	}
	serial := binary.LittleEndian.Uint32(first[14:])
	data := 27 + int(first[26])
	if data+19 > len(first) {
		return 0, false
	}
	packet := first[data:]
	var rate, skip uint64
	switch {
	case bytes.HasPrefix(packet, []byte("OpusHead")):
		rate, skip = 48000, uint64(binary.LittleEndian.Uint16(packet[10:]))
	case bytes.HasPrefix(packet, []byte("\x01vorbis")):
		rate = uint64(binary.LittleEndian.Uint32(packet[12:]))
	default:
		return 0, false
	}
	if rate == 0 {
		return 0, false
	}
	tailAt := max(0, size-maxOggPage)
	tail := make([]byte, size-tailAt)
	if n, _ := r.ReadAt(tail, tailAt); n < len(tail) {
		return 0, false
	}
	for i := bytes.LastIndex(tail, []byte("OggS")); i >= 0; i = bytes.LastIndex(tail[:i], []byte("OggS")) {
		if len(tail)-i < 27 || tail[i+4] != 0 || binary.LittleEndian.Uint32(tail[i+14:]) != serial {
			continue
		}
		granule := binary.LittleEndian.Uint64(tail[i+6:])
		if granule == math.MaxUint64 { // no packet ends on this page
			continue
		}
		if granule <= skip {
			return 0, false
		}
		return float64(granule-skip) / float64(rate), true
	}
	return 0, false
}

// mp4Seconds finds the movie header (moov/mvhd) of an MP4 or M4A file:
// its duration over its timescale. A fragmented file's header may say 0,
// which means unknown.
func mp4Seconds(r io.ReaderAt, size int64) (float64, bool) {
	moov, moovSize, ok := mp4Box(r, 0, size, "moov")
	if !ok {
		return 0, false
	}
	mvhd, mvhdSize, ok := mp4Box(r, moov, moov+moovSize, "mvhd")
	if !ok || mvhdSize < 4 {
		return 0, false
	}
	var b [4 + 8 + 8 + 4 + 8]byte
	n, _ := r.ReadAt(b[:min(int64(len(b)), mvhdSize)], mvhd)
	var scale, duration uint64
	switch {
	case b[0] == 0 && n >= 4+4+4+4+4:
		scale, duration = uint64(binary.BigEndian.Uint32(b[12:])), uint64(binary.BigEndian.Uint32(b[16:]))
		if duration == math.MaxUint32 {
			return 0, false
		}
	case b[0] == 1 && n >= len(b):
		scale, duration = uint64(binary.BigEndian.Uint32(b[20:])), binary.BigEndian.Uint64(b[24:])
		if duration == math.MaxUint64 {
			return 0, false
		}
	default:
		return 0, false
	}
	if scale == 0 || duration == 0 {
		return 0, false
	}
	return float64(duration) / float64(scale), true
}

// mp4Box finds the box of type typ among the boxes between from and to,
// and answers where its content starts and its size.
func mp4Box(r io.ReaderAt, from, to int64, typ string) (content, size int64, ok bool) {
	var h [16]byte
	for off, i := from, 0; off+8 <= to && i < maxHeaderEntries; i++ {
		if n, _ := r.ReadAt(h[:8], off); n < 8 {
			return 0, 0, false
		}
		n, header := int64(binary.BigEndian.Uint32(h[:4])), int64(8)
		switch n {
		case 0: // to the end
			n = to - off
		case 1: // a 64-bit size follows
			if m, _ := r.ReadAt(h[8:16], off+8); m < 8 {
				return 0, 0, false
			}
			n, header = int64(binary.BigEndian.Uint64(h[8:16])), 16
		}
		if n < header || n > to-off {
			return 0, 0, false
		}
		if string(h[4:8]) == typ {
			return off + header, n - header, true
		}
		off += n
	}
	return 0, 0, false
}

// EBML ids, marker bits kept, of the WebM and Matroska elements
// webmSeconds reads.
const (
	ebmlIDHeader        = 0x1A45DFA3
	ebmlIDSegment       = 0x18538067
	ebmlIDInfo          = 0x1549A966
	ebmlIDCluster       = 0x1F43B675
	ebmlIDTimecodeScale = 0x2AD7B1
	ebmlIDDuration      = 0x4489
)

// maxEBMLInfo bounds the Segment Info read: it holds a few numbers and
// names (the muxer's, the writer's, a title).
const maxEBMLInfo = 64 << 10

// webmSeconds reads a WebM or Matroska file's Segment Info: its Duration,
// a float counted in its TimecodeScale's nanoseconds (1,000,000 when it
// names none). The Segment's elements are walked from its start up to the
// Info; the audio's first Cluster, or an element of unknown size, ends the
// walk. A recording written as it was made (a browser's MediaRecorder)
// often has no Duration: its length is not known.
func webmSeconds(r io.ReaderAt, size int64) (float64, bool) {
	id, n, hdr, ok := ebmlElementAt(r, 0, size)
	if !ok || id != ebmlIDHeader || n < 0 {
		return 0, false
	}
	off := hdr + n
	if id, n, hdr, ok = ebmlElementAt(r, off, size); !ok || id != ebmlIDSegment {
		return 0, false
	}
	end := size
	if n >= 0 && off+hdr+n < size {
		end = off + hdr + n
	}
	off += hdr
	for i := 0; off < end && i < maxHeaderEntries; i++ {
		id, n, hdr, ok = ebmlElementAt(r, off, end)
		switch {
		case !ok || n < 0 || id == ebmlIDCluster:
			return 0, false
		case id == ebmlIDInfo:
			if n > maxEBMLInfo || off+hdr+n > end {
				return 0, false
			}
			info := make([]byte, n)
			if m, _ := r.ReadAt(info, off+hdr); int64(m) < n {
				return 0, false
			}
			return ebmlInfoSeconds(info)
		}
		off += hdr + n
	}
	return 0, false
}

// ebmlInfoSeconds reads the duration from a Segment Info's content.
func ebmlInfoSeconds(info []byte) (float64, bool) {
	scale, duration := uint64(1_000_000), -1.0
	for len(info) > 0 {
		id, n, hdr, ok := ebmlElement(info)
		if !ok || n < 0 || n > int64(len(info)-hdr) {
			return 0, false
		}
		v := info[hdr : hdr+int(n)]
		switch id {
		case ebmlIDTimecodeScale:
			if len(v) == 0 || len(v) > 8 {
				return 0, false
			}
			scale = 0
			for _, c := range v {
				scale = scale<<8 | uint64(c)
			}
		case ebmlIDDuration:
			switch len(v) {
			case 4:
				duration = float64(math.Float32frombits(binary.BigEndian.Uint32(v)))
			case 8:
				duration = math.Float64frombits(binary.BigEndian.Uint64(v))
			default:
				return 0, false
			}
		}
		info = info[hdr+int(n):]
	}
	if duration < 0 || scale == 0 {
		return 0, false
	}
	return duration * float64(scale) / 1e9, true
}

// ebmlElementAt reads the head of the EBML element at off, which must
// start before to (see ebmlElement).
func ebmlElementAt(r io.ReaderAt, off, to int64) (id uint32, size, header int64, ok bool) {
	var b [4 + 8]byte
	if off >= to {
		return 0, 0, 0, false
	}
	m, _ := r.ReadAt(b[:min(int64(len(b)), to-off)], off)
	id, size, hdr, ok := ebmlElement(b[:m])
	return id, size, int64(hdr), ok
}

// ebmlElement reads the head of the EBML element b starts with: its id (a
// variable-length integer of 1 to 4 bytes, kept with its marker bits), the
// size of its content (of 1 to 8 bytes, -1 when it is unknown: every value
// bit set) and the head's length.
func ebmlElement(b []byte) (id uint32, size int64, header int, ok bool) {
	idLen := ebmlLen(b)
	if idLen == 0 || idLen > 4 {
		return 0, 0, 0, false
	}
	for _, c := range b[:idLen] {
		id = id<<8 | uint32(c)
	}
	sizeLen := ebmlLen(b[idLen:])
	if sizeLen == 0 {
		return 0, 0, 0, false
	}
	mask := byte(0xFF) >> sizeLen
	v, unknown := uint64(b[idLen]&mask), b[idLen]&mask == mask
	for _, c := range b[idLen+1 : idLen+sizeLen] {
		v, unknown = v<<8|uint64(c), unknown && c == 0xFF
	}
	if unknown {
		return id, -1, idLen + sizeLen, true
	}
	return id, int64(v), idLen + sizeLen, true // at most 56 bits
}

// ebmlLen is the length of the variable-length integer b starts with (its
// leading zero bits, plus one), 0 when b holds less than that or it is not
// one.
func ebmlLen(b []byte) int {
	if len(b) == 0 || b[0] == 0 {
		return 0
	}
	n := bits.LeadingZeros8(b[0]) + 1
	if n > len(b) {
		return 0
	}
	return n
}

// mp3Seconds counts the MPEG audio frames from off: their samples over
// their sample rate. The frames must follow one another in one format and
// cover nearly all the file (tags at its end aside).
func mp3Seconds(r io.ReaderAt, off, size int64) (float64, bool) {
	if off >= size {
		return 0, false
	}
	br := bufio.NewReaderSize(io.NewSectionReader(r, off, size-off), 64<<10)
	var (
		first   mp3Header
		samples int64
		covered int64
	)
	for {
		h, err := br.Peek(4)
		if err != nil {
			break
		}
		f, ok := parseMP3Header(h)
		if !ok || (samples > 0 && !f.sameStream(first)) {
			break
		}
		if samples == 0 {
			first = f
		}
		if n, _ := br.Discard(f.length); n < f.length {
			break // a truncated last frame is not decoded
		}
		samples += int64(f.samples)
		covered += int64(f.length)
	}
	rest := size - off
	if samples == 0 || covered < rest*9/10 {
		return 0, false
	}
	return float64(samples) / float64(first.rate), true
}

// mp3Header is what the duration needs of an MPEG audio frame header.
type mp3Header struct {
	version, layer byte
	rate           int
	samples        int // per frame
	length         int // of the frame, in bytes
}

func (h mp3Header) sameStream(o mp3Header) bool {
	return h.version == o.version && h.layer == o.layer && h.rate == o.rate
}

// Bit rates in kbit/s by index, for MPEG-1 layers I, II, III and MPEG-2
// and 2.5 layers I, II and III.
var mp3Bitrates = [5][15]int{
	{0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448},
	{0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384},
	{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320},
	{0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256},
	{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160},
}

// parseMP3Header reads an MPEG-1, 2 or 2.5 layer I, II or III frame
// header; free-format frames, whose length the header does not tell, are
// refused.
func parseMP3Header(h []byte) (mp3Header, bool) {
	if h[0] != 0xFF || h[1]&0xE0 != 0xE0 {
		return mp3Header{}, false
	}
	version, layerBits := h[1]>>3&3, h[1]>>1&3 // version 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
	bitIdx, rateIdx, pad := int(h[2]>>4), int(h[2]>>2&3), int(h[2]>>1&1)
	if version == 1 || layerBits == 0 || bitIdx == 0 || bitIdx == 15 || rateIdx == 3 {
		return mp3Header{}, false
	}
	layer := 4 - layerBits // 1, 2 or 3
	rate := [3]int{44100, 48000, 32000}[rateIdx]
	table := int(layer) - 1
	switch version {
	case 2:
		rate /= 2
	case 0:
		rate /= 4
	}
	if version != 3 {
		table = 3
		if layer > 1 {
			table = 4
		}
	}
	bitrate := mp3Bitrates[table][bitIdx] * 1000
	f := mp3Header{version: version, layer: layer, rate: rate}
	switch {
	case layer == 1:
		f.samples, f.length = 384, (12*bitrate/rate+pad)*4
	case layer == 3 && version != 3:
		f.samples, f.length = 576, 72*bitrate/rate+pad
	default:
		f.samples, f.length = 1152, 144*bitrate/rate+pad
	}
	return f, f.length > 4
}
