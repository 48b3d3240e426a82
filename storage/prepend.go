package storage

import (
	"fmt"
	"path/filepath"
)

// Prepend creates (or, after an interrupted run, reopens) the file that
// lies just before the queue's first one and puts it at the front. A
// member that catches up on data older than what it holds fills such files
// (raftlog's backfill, ConsumeQueue backfill); their WrotePosition stays 0
// for a new file until the caller sets it. It fails on an empty queue or
// when the first file starts at offset 0.
func (q *MappedFileQueue) Prepend() (*MappedFile, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.files) == 0 {
		return nil, fmt.Errorf("%w: prepend to the empty queue %s", ErrOutOfRange, q.dir)
	}
	from := q.files[0].FileFromOffset() - int64(q.fileSize)
	if from < 0 {
		return nil, fmt.Errorf("%w: prepend before offset 0 in %s", ErrOutOfRange, q.dir)
	}
	mf, err := OpenMappedFile(q.fsys, filepath.Join(q.dir, FileName(from)), from, q.fileSize)
	if err != nil {
		return nil, err
	}
	if q.buffered {
		mf.SetBuffered(true)
	}
	q.files = append([]*MappedFile{mf}, q.files...)
	return mf, nil
}

// PrependTo prepends files until one holds offset (see Prepend).
func (q *MappedFileQueue) PrependTo(offset int64) error {
	for {
		if first := q.First(); first == nil || first.FileFromOffset() <= offset {
			return nil
		}
		if _, err := q.Prepend(); err != nil {
			return err
		}
	}
}

// WriteAtDurable copies p to pos through the mapping and syncs exactly that
// range, without the file's lock during the sync and without marking the
// range for Flush. It is for a range no appender or reader touches yet (a
// backfill below the write position), so an append to the same file is
// never held up by it. The caller holds a reference (Retain).
func (m *MappedFile) WriteAtDurable(p []byte, pos int) error {
	if pos < 0 || pos+len(p) > m.size {
		return fmt.Errorf("%w: write [%d,%d) outside %s (size %d)", ErrOutOfRange, pos, pos+len(p), m.path, m.size)
	}
	if m.closed.Load() {
		return fmt.Errorf("%w: %s", ErrFileClosed, m.path)
	}
	copy(m.data[pos:], p)
	return m.file.Msync(m.data[pos : pos+len(p)])
}
