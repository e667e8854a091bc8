package audio

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// riffChunk is a RIFF chunk: its id, its size and its body, padded to an
// even size.
func riffChunk(id string, body []byte) []byte {
	b := append([]byte(id), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...)
	b = append(b, body...)
	if len(body)%2 == 1 {
		b = append(b, 0)
	}
	return b
}

// wavFmt is a WAV fmt chunk's body.
func wavFmt(format, channels uint16, rate uint32, bits uint16) []byte {
	block := channels * ((bits + 7) / 8)
	b := binary.LittleEndian.AppendUint16(nil, format)
	b = binary.LittleEndian.AppendUint16(b, channels)
	b = binary.LittleEndian.AppendUint32(b, rate)
	b = binary.LittleEndian.AppendUint32(b, rate*uint32(block))
	b = binary.LittleEndian.AppendUint16(b, block)
	return binary.LittleEndian.AppendUint16(b, bits)
}

// riff is a RIFF WAVE file of chunks.
func riff(chunks ...[]byte) []byte {
	body := bytes.Join(chunks, nil)
	b := append([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(4+len(body)))...)
	return append(append(b, "WAVE"...), body...)
}

// flacFile is a FLAC file's start: its marker and STREAMINFO.
func flacFile(rate uint64, total uint64) []byte {
	b := []byte("fLaC\x80\x00\x00\x22")               // last block, STREAMINFO, 34 bytes
	b = append(b, 0x10, 0, 0x10, 0, 0, 0, 0, 0, 0, 0) // block and frame sizes
	b = binary.BigEndian.AppendUint64(b, rate<<44|1<<41|15<<36|total)
	return append(b, make([]byte, 16)...) // MD5
}

// oggPage is an Ogg page of one packet.
func oggPage(serial uint32, granule uint64, packet []byte) []byte {
	b := []byte("OggS\x00\x00")
	b = binary.LittleEndian.AppendUint64(b, granule)
	b = binary.LittleEndian.AppendUint32(b, serial)
	b = append(b, make([]byte, 8)...) // sequence number, CRC
	var lacing []byte
	for n := len(packet); ; n -= 255 {
		if n < 255 {
			lacing = append(lacing, byte(n))
			break
		}
		lacing = append(lacing, 255)
	}
	b = append(b, byte(len(lacing)))
	return append(append(b, lacing...), packet...)
}

// mp4Atom is an MP4 box.
func mp4Atom(typ string, body ...[]byte) []byte {
	content := bytes.Join(body, nil)
	return append(append(binary.BigEndian.AppendUint32(nil, uint32(8+len(content))), typ...), content...)
}

func mvhd(version byte, scale uint32, duration uint64) []byte {
	b := []byte{version, 0, 0, 0}
	if version == 1 {
		b = append(b, make([]byte, 16)...)
		b = binary.BigEndian.AppendUint32(b, scale)
		b = binary.BigEndian.AppendUint64(b, duration)
	} else {
		b = append(b, make([]byte, 8)...)
		b = binary.BigEndian.AppendUint32(b, scale)
		b = binary.BigEndian.AppendUint32(b, uint32(duration))
	}
	return mp4Atom("mvhd", append(b, make([]byte, 80)...))
}

// mp3Frames is n MPEG-1 layer III frames at 128 kbit/s and 44.1 kHz, every
// third padded as an encoder does, and their duration.
func mp3Frames(n int) ([]byte, float64) {
	var b []byte
	for i := range n {
		pad := byte(0)
		if i%3 == 2 {
			pad = 2
		}
		frame := make([]byte, 417+int(pad/2))
		frame[0], frame[1], frame[2], frame[3] = 0xFF, 0xFB, 0x90|pad, 0x64
		b = append(b, frame...)
	}
	return b, float64(n*1152) / 44100
}

// id3 is an ID3v2.4 tag with a body of n bytes.
func id3(n int) []byte {
	return append([]byte{'I', 'D', '3', 4, 0, 0, byte(n >> 21 & 0x7F), byte(n >> 14 & 0x7F), byte(n >> 7 & 0x7F), byte(n & 0x7F)}, make([]byte, n)...)
}

// ebml is an EBML element (WebM, Matroska): its id, its size, its body. A
// size of -1 writes the size that means unknown.
func ebml(id string, size int, body ...[]byte) []byte {
	content := bytes.Join(body, nil)
	if size == 0 {
		size = len(content)
	}
	b := []byte(id)
	switch {
	case size < 0:
		b = append(b, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)
	case size < 0x7F:
		b = append(b, 0x80|byte(size))
	default:
		b = append(b, 0x01, 0, 0, 0, byte(size>>24), byte(size>>16), byte(size>>8), byte(size))
	}
	return append(b, content...)
}

// EBML ids of the elements the tests write.
const (
	ebmlHeader     = "\x1a\x45\xdf\xa3"
	ebmlDocType    = "\x42\x82"
	ebmlSegment    = "\x18\x53\x80\x67"
	ebmlSeekHead   = "\x11\x4d\x9b\x74"
	ebmlVoid       = "\xec"
	ebmlInfo       = "\x15\x49\xa9\x66"
	ebmlScale      = "\x2a\xd7\xb1"
	ebmlDuration   = "\x44\x89"
	ebmlMuxingApp  = "\x4d\x80"
	ebmlTracks     = "\x16\x54\xae\x6b"
	ebmlCluster    = "\x1f\x43\xb6\x75"
	ebmlTimecode   = "\xe7"
	ebmlSimpleBlck = "\xa3"
)

// webmFile is a WebM (or Matroska) file whose Segment holds info, its
// tracks and a cluster of audio; live writes the Segment and the cluster
// with unknown sizes, as a recorder that streams does.
func webmFile(docType string, live bool, info ...[]byte) []byte {
	head := ebml(ebmlHeader, 0, ebml(ebmlDocType, 0, []byte(docType)))
	blocks := append(ebml(ebmlTimecode, 0, []byte{0}), ebml(ebmlSimpleBlck, 0, make([]byte, 400))...)
	cluster, segSize := ebml(ebmlCluster, 0, blocks), 0
	if live {
		cluster, segSize = ebml(ebmlCluster, -1, blocks), -1
	}
	return append(head, ebml(ebmlSegment, segSize,
		ebml(ebmlSeekHead, 0, make([]byte, 20)), ebml(ebmlVoid, 0, make([]byte, 30)),
		ebml(ebmlInfo, 0, info...),
		ebml(ebmlTracks, 0, make([]byte, 40)),
		cluster)...)
}

func float64Bytes(f float64) []byte { return binary.BigEndian.AppendUint64(nil, math.Float64bits(f)) }
func float32Bytes(f float32) []byte { return binary.BigEndian.AppendUint32(nil, math.Float32bits(f)) }

// The duration an upload's own header tells, in each format read.
func TestAudioFileSeconds(t *testing.T) {
	pcm16 := wavFmt(1, 2, 16000, 16) // 64000 bytes a second
	second := make([]byte, 64000)
	streamingData := append([]byte("data\xff\xff\xff\xff"), second[:32000]...)
	ext := append(wavFmt(0xFFFE, 1, 48000, 24), make([]byte, 24)...)
	adpcm := wavFmt(0x11, 1, 8000, 4) // IMA ADPCM
	binary.LittleEndian.PutUint32(adpcm[8:], 4055)
	binary.LittleEndian.PutUint16(adpcm[12:], 256)
	mp3, mp3Secs := mp3Frames(100)
	opusHead := append([]byte("OpusHead\x01\x02"), binary.LittleEndian.AppendUint16(nil, 312)...)
	opusHead = append(opusHead, 0x80, 0xBB, 0, 0, 0, 0, 0)
	vorbisID := append([]byte("\x01vorbis\x00\x00\x00\x00\x01"), binary.LittleEndian.AppendUint32(nil, 44100)...)
	vorbisID = append(vorbisID, make([]byte, 14)...)
	ftyp := mp4Atom("ftyp", []byte("M4A \x00\x00\x00\x00M4A mp42isom"))
	mdat := mp4Atom("mdat", make([]byte, 5000))
	for _, tc := range []struct {
		name string
		file []byte
		want float64 // 0: not known
	}{
		{"wav: PCM", riff(riffChunk("fmt ", pcm16), riffChunk("data", append(second, second[:16000]...))), 1.25},
		{"wav: a list chunk of odd size before the data", riff(riffChunk("fmt ", pcm16), riffChunk("LIST", []byte("INFOISFT\x03\x00\x00\x00ab\x00")), riffChunk("data", second)), 1},
		{"wav: data of unknown size runs to the end", append(riff(riffChunk("fmt ", pcm16)), streamingData...), 0.5},
		{"wav: data larger than the file", riff(riffChunk("fmt ", pcm16), riffChunk("data", second))[:12+24+8+16000], 0.25},
		{"wav: extensible 24-bit", riff(riffChunk("fmt ", ext), riffChunk("data", make([]byte, 3*48000*2))), 2},
		{"wav: compressed, by its fact chunk", riff(riffChunk("fmt ", adpcm), riffChunk("fact", binary.LittleEndian.AppendUint32(nil, 20000)), riffChunk("data", make([]byte, 10240))), 2.5},
		{"wav: a byte rate that is not the samples'", func() []byte {
			f := wavFmt(1, 1, 16000, 16)
			binary.LittleEndian.PutUint32(f[8:], 1<<30)
			return riff(riffChunk("fmt ", f), riffChunk("data", second))
		}(), 0},
		{"wav: no fmt chunk", riff(riffChunk("data", second)), 0},
		{"flac", append(flacFile(44100, 44100*3+22050), make([]byte, 100)...), 3.5},
		{"flac after an ID3 tag", append(id3(20), flacFile(48000, 48000*2)...), 2},
		{"flac of unknown length", flacFile(44100, 0), 0},
		{"ogg opus", bytes.Join([][]byte{oggPage(7, 0, opusHead), oggPage(7, 0, []byte("OpusTags")), oggPage(7, 48000, make([]byte, 300)), oggPage(9, 999999, nil), oggPage(7, 96312, make([]byte, 700))}, nil), 2},
		{"ogg vorbis", bytes.Join([][]byte{oggPage(1, 0, vorbisID), oggPage(1, 88200, make([]byte, 300)), oggPage(1, ^uint64(0), make([]byte, 10))}, nil), 2},
		{"ogg of another codec", bytes.Join([][]byte{oggPage(1, 0, []byte("\x7fFLAC\x01\x00\x00\x01fLaC")), oggPage(1, 88200, make([]byte, 300))}, nil), 0},
		{"m4a, movie header last", bytes.Join([][]byte{ftyp, mdat, mp4Atom("moov", mvhd(0, 1000, 4250), mp4Atom("trak"))}, nil), 4.25},
		{"mp4, movie header first, 64-bit", bytes.Join([][]byte{ftyp, mp4Atom("moov", mp4Atom("udta"), mvhd(1, 44100, 44100*90)), mdat}, nil), 90},
		{"mp4 fragmented: no duration", bytes.Join([][]byte{ftyp, mp4Atom("moov", mvhd(0, 1000, 0)), mdat}, nil), 0},
		{"mp4 without a movie header", bytes.Join([][]byte{ftyp, mdat}, nil), 0},
		{"mp3", mp3, mp3Secs},
		{"mp3 with ID3v2 and ID3v1 tags", append(append(id3(1000), mp3...), append([]byte("TAG"), make([]byte, 125)...)...), mp3Secs},
		{"mp3 broken off half-way", append(mp3[:len(mp3)/2:len(mp3)/2], make([]byte, len(mp3)/2)...), 0},
		{"webm", webmFile("webm", false, ebml(ebmlScale, 0, []byte{0x0f, 0x42, 0x40}), ebml(ebmlMuxingApp, 0, []byte("Lavf")), ebml(ebmlDuration, 0, float64Bytes(4250))), 4.25},
		{"webm: the default timecode scale", webmFile("webm", false, ebml(ebmlDuration, 0, float64Bytes(1500))), 1.5},
		{"matroska: a float32 duration, another scale", webmFile("matroska", false, ebml(ebmlDuration, 0, float32Bytes(20000)), ebml(ebmlScale, 0, []byte{0x01, 0x86, 0xa0})), 2},
		{"webm of unknown size, with a duration", webmFile("webm", true, ebml(ebmlDuration, 0, float64Bytes(3000))), 3},
		{"live webm: no duration", webmFile("webm", true, ebml(ebmlScale, 0, []byte{0x0f, 0x42, 0x40}), ebml(ebmlMuxingApp, 0, []byte("Chrome"))), 0},
		{"webm: a duration of 0", webmFile("webm", false, ebml(ebmlDuration, 0, float64Bytes(0))), 0},
		{"webm: a duration of the wrong size", webmFile("webm", false, ebml(ebmlDuration, 0, []byte{1, 2, 3})), 0},
		{"webm header alone", ebml(ebmlHeader, 0, ebml(ebmlDocType, 0, []byte("webm"))), 0},
		{"text", []byte("this is not audio, only some text"), 0},
		{"too short", []byte("RIFF"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := fileSeconds(bytes.NewReader(tc.file), int64(len(tc.file)))
			assert.Equal(t, tc.want != 0, ok)
			assert.InDelta(t, tc.want, got, 1e-9)
		})
	}
}

// A spool reads at any offset, across its memory part and its file.
func TestAudioSpoolReadAt(t *testing.T) {
	data := make([]byte, 3000)
	for i := range data {
		data[i] = byte(i * 13)
	}
	s := NewSpool(t.TempDir(), 1000, 0)
	defer s.Close()
	_, err := s.Write(data)
	require.NoError(t, err)
	require.True(t, s.Spilled())
	for _, tc := range []struct{ off, n int }{{0, 10}, {990, 20}, {1000, 5}, {2990, 10}, {0, 3000}} {
		p := make([]byte, tc.n)
		n, err := s.ReadAt(p, int64(tc.off))
		require.NoError(t, err)
		assert.Equal(t, data[tc.off:tc.off+tc.n], p[:n])
	}
	p := make([]byte, 20)
	n, err := s.ReadAt(p, 2990)
	assert.Equal(t, 10, n)
	assert.ErrorIs(t, err, io.EOF)
	assert.Equal(t, data[2990:], p[:n])
}

// fileSeconds reads whatever a client uploads: it must neither panic nor
// answer a duration that is not a positive number.
func FuzzAudioFileSeconds(f *testing.F) {
	mp3, _ := mp3Frames(3)
	for _, seed := range [][]byte{
		riff(riffChunk("fmt ", wavFmt(1, 1, 16000, 16)), riffChunk("data", make([]byte, 320))),
		flacFile(44100, 4410), mp3, append(id3(4), mp3...),
		oggPage(1, 4800, []byte("OpusHead\x01\x01\x00\x00\x80\xbb\x00\x00\x00\x00\x00")),
		mp4Atom("ftyp", []byte("isom")), append(mp4Atom("ftyp", []byte("isom")), mp4Atom("moov", mvhd(0, 1000, 1500))...),
		webmFile("webm", false, ebml(ebmlDuration, 0, float64Bytes(1500))), webmFile("webm", true),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		secs, ok := fileSeconds(bytes.NewReader(b), int64(len(b)))
		if ok && !(secs > 0) {
			t.Fatalf("ok with %v seconds", secs)
		}
		if !ok && secs != 0 {
			t.Fatalf("not ok with %v seconds", secs)
		}
	})
}

// countingReaderAt counts the reads made of it.
type countingReaderAt struct {
	r     io.ReaderAt
	reads int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.r.ReadAt(p, off)
}

// A crafted upload of millions of empty chunks (WAV), boxes (MP4) or
// elements (WebM) before its audio costs a bounded number of reads, where
// it cost one per 8 bytes: three million reads of the spooled file, about a
// second of CPU, after each transcription of such a file.
func TestAudioFileSecondsReadsAHandfulOfHeaders(t *testing.T) {
	const size = 4 << 20
	wav := []byte("RIFF\x00\x00\x00\x00WAVE")
	wav = append(wav, riffChunk("fmt ", wavFmt(1, 1, 16000, 16))...)
	for len(wav)+8+8+320 <= size {
		wav = append(wav, "junk\x00\x00\x00\x00"...)
	}
	wav = append(wav, riffChunk("data", make([]byte, 320))...)

	mp4 := mp4Atom("ftyp", []byte("isom"))
	moov := mp4Atom("moov", mvhd(0, 1000, 1500))
	for len(mp4)+8+len(moov) <= size {
		mp4 = append(mp4, "\x00\x00\x00\x08free"...)
	}
	mp4 = append(mp4, moov...)

	webm := ebml(ebmlHeader, 0, ebml(ebmlDocType, 0, []byte("webm")))
	webm = append(webm, ebml(ebmlSegment, -1)...)
	info := ebml(ebmlInfo, 0, ebml(ebmlDuration, 0, float64Bytes(1500)))
	for len(webm)+2+len(info) <= size {
		webm = append(webm, ebml(ebmlVoid, 0)...)
	}
	webm = append(webm, info...)

	for name, file := range map[string][]byte{"wav": wav, "mp4": mp4, "webm": webm} {
		r := &countingReaderAt{r: bytes.NewReader(file)}
		_, ok := fileSeconds(r, int64(len(file)))
		assert.False(t, ok, "%s: a file of a million empty entries is given up on", name)
		assert.LessOrEqual(t, r.reads, 2*maxHeaderEntries+8, "%s: reads", name)
	}
}
