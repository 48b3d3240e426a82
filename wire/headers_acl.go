package wire

// Headers of RocketMQ 4.x's plain ACL administration (request codes
// 50-53; common.protocol.header.*AccessConfig* in 4.9).

// CreateAccessConfigRequestHeader is UPDATE_AND_CREATE_ACL_CONFIG's (50)
// header: one account, created or updated. TopicPerms and GroupPerms are
// comma-separated NAME=PERM lists.
type CreateAccessConfigRequestHeader struct {
	AccessKey          string `ext:"accessKey,required"`
	SecretKey          string `ext:"secretKey,omitempty"`
	WhiteRemoteAddress string `ext:"whiteRemoteAddress,omitempty"`
	Admin              bool   `ext:"admin"`
	DefaultTopicPerm   string `ext:"defaultTopicPerm,omitempty"`
	DefaultGroupPerm   string `ext:"defaultGroupPerm,omitempty"`
	TopicPerms         string `ext:"topicPerms,omitempty"`
	GroupPerms         string `ext:"groupPerms,omitempty"`
}

// DeleteAccessConfigRequestHeader is DELETE_ACL_CONFIG's (51) header.
type DeleteAccessConfigRequestHeader struct {
	AccessKey string `ext:"accessKey,required"`
}

// UpdateGlobalWhiteAddrsConfigRequestHeader is
// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG's (53) header: GlobalWhiteAddrs is a
// comma-separated list; AclFileFullPath names the file to change.
type UpdateGlobalWhiteAddrsConfigRequestHeader struct {
	GlobalWhiteAddrs string `ext:"globalWhiteAddrs,required"`
	AclFileFullPath  string `ext:"aclFileFullPath,omitempty"`
}

// GetBrokerAclConfigResponseHeader is GET_BROKER_CLUSTER_ACL_INFO's (52)
// response header. Version is a DataVersion as JSON; AllAclFileVersion
// maps each file to its DataVersion. AclEnable and AclHash are raftmq's:
// whether the broker checks requests and its rules' content hash, which
// the members of a broker group must share.
type GetBrokerAclConfigResponseHeader struct {
	Version           string `ext:"version,omitempty"`
	AllAclFileVersion string `ext:"allAclFileVersion,omitempty"`
	BrokerName        string `ext:"brokerName"`
	BrokerAddr        string `ext:"brokerAddr"`
	ClusterName       string `ext:"clusterName"`
	AclEnable         bool   `ext:"aclEnable"`
	AclHash           string `ext:"aclHash,omitempty"`
}
