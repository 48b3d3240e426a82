package store

// DeleteExpiredManually asks the next retention checks to delete expired
// CommitLog segments even outside deleteWhen (mqadmin
// deleteExpiredCommitLog; RocketMQ's executeDeleteFilesManually).
func (s *MessageStore) DeleteExpiredManually() { s.clean.DeleteExpiredManually() }

// RootDir is the store's storePathRootDir: where the broker keeps its
// own files next to the store's.
func (s *MessageStore) RootDir() string { return s.cfg.StorePathRootDir }
