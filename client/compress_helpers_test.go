package client

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/raftmq/raftmq/wire"
)

// Compression types of a stored message's sysFlag (RocketMQ's
// MessageSysFlag.COMPRESSION_*_TYPE), for the package's external tests.
const (
	SysFlagLZ4  = wire.SysFlagCompressed | 1<<8
	SysFlagZstd = wire.SysFlagCompressed | 2<<8
	SysFlagZlib = wire.SysFlagCompressed | 3<<8
)

// Zlib compresses body into one zlib stream, as RocketMQ's zlib
// compressor (the only one before RocketMQ 5) writes it.
func Zlib(t testing.TB, body []byte) []byte { return zlibBytes(t, body) }

// JavaLZ4 compresses body as RocketMQ's Lz4Compressor does: one LZ4 frame
// as lz4-java's LZ4FrameOutputStream(out) writes it, 4 MiB blocks,
// independent, no content size and no content or block checksum
// (FLG 0x60, BD 0x70); an incompressible block is stored raw.
func JavaLZ4(t testing.TB, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	if err := w.Apply(lz4.BlockSizeOption(lz4.Block4Mb), lz4.ChecksumOption(false), lz4.BlockChecksumOption(false)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if len(b) < 6 || !bytes.Equal(b[:6], []byte{0x04, 0x22, 0x4d, 0x18, 0x60, 0x70}) {
		t.Fatalf("LZ4 frame header % x, not LZ4FrameOutputStream's", b[:min(len(b), 6)])
	}
	return b
}

// JavaZstd compresses body as RocketMQ's ZstdCompressor does at its
// default level 5: one zstd frame as zstd-jni's ZstdOutputStream writes
// it, streamed with a 2 MiB window and no checksum. (For a body that fits
// one block the encoder here also writes the content size, which the
// Java stream leaves out; the decoder needs neither.)
func JavaZstd(t testing.TB, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(false), zstd.WithWindowSize(2<<20))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
