package memcached

// The tests of package memcached are in package memcached_test, so that they
// can share the fixtures of memcachedtest, which builds on this package.
// These names give them the unexported rules and limits they check.

// The allow-list of spec.extraArgs, for the conformance corpus.
type (
	ExtraArgOption = extraArgOption
	ValueRule      = valueRule
)

var (
	ExtraArgOptions    = extraArgOptions
	ExtendedOptions    = extendedOptions
	ExtendedPattern    = extendedPattern
	WholeNumberPattern = wholeNumberPattern
	ItemSizeBytes      = itemSizeBytes
)

const (
	WholeNumber = wholeNumber
	Decimal     = decimal
	OneOf       = oneOf
	Size        = byteSize
	Suboptions  = suboptions
)

var (
	AvailableCondition   = availableCondition
	CacheMB              = cacheMB
	DegradedCondition    = degradedCondition
	ItemLockPower        = itemLockPower
	NewCondition         = newCondition
	ProgressingCondition = progressingCondition
	SetCondition         = setCondition
)

const (
	ConnLimitPattern         = connLimitPattern
	ConnsPerThread           = connsPerThread
	MinConnLimit             = minConnLimit
	DefaultCacheMB           = defaultCacheMB
	DefaultItemBytes         = defaultItemBytes
	DefaultMemoryLimit       = defaultMemoryLimit
	DefaultThreads           = defaultThreads
	ExtraArgPattern          = extraArgPattern
	HashpowerPattern         = hashpowerPattern
	MaxConnLimit             = maxConnLimit
	MaxItemBytes             = maxItemBytes
	Mebibyte                 = mebibyte
	MemcachedOverheadMB      = memcachedOverheadMB
	MemcachedPort            = memcachedPort
	MemcachedUID             = memcachedUID
	MetricsPort              = metricsPort
	MinMemoryLimit           = minMemoryLimit
	MetricsPortName          = metricsPortName
	MsgAuthProtocol          = msgAuthProtocol
	MsgConnLimit             = msgConnLimit
	MsgExtended              = msgExtended
	MsgGrowthFactor          = msgGrowthFactor
	MsgListenBacklog         = msgListenBacklog
	MsgReqsPerEvent          = msgReqsPerEvent
	MsgSlabMinSize           = msgSlabMinSize
	MsgConnsPerThread        = msgConnsPerThread
	MsgHashpower             = msgHashpower
	MsgHashpowerThreads      = msgHashpowerThreads
	MsgItemSize              = msgItemSize
	MsgItemSizeFits          = msgItemSizeFits
	MsgProtocol              = msgProtocol
	MsgThreads               = msgThreads
	MsgTolerationExistsValue = msgTolerationExistsValue
	MsgTolerationKeyless     = msgTolerationKeyless
	MsgTolerationSeconds     = msgTolerationSeconds
	PreStopSleepSeconds      = preStopSleepSeconds
	ProtocolPattern          = protocolPattern
	SlabChunkBytes           = slabChunkBytes
	TerminationGracePeriod   = terminationGracePeriod
	ThreadsPattern           = threadsPattern
)

var Project = project

// ScopeExpr is scopeExpr, for TestScopeExpr.
var ScopeExpr = scopeExpr

// CacheRules returns rules.yaml's CacheRuleGroup as the operator read it.
func CacheRules() (RuleGroup, error) { return cacheRules, cacheRulesErr }

// LegacySpecHash is the record of operator versions before templateSpec.
var LegacySpecHash = legacySpecHash
