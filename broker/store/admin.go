package store

// DeleteExpiredManually asks the next retention checks to delete expired
// CommitLog segments even outside deleteWhen (mqadmin
// deleteExpiredCommitLog; RocketMQ's executeDeleteFilesManually).
func (s *MessageStore) DeleteExpiredManually() { s.clean.DeleteExpiredManually() }
