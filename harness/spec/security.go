package spec

// Security are the load clients' connection settings, Kafka's client
// names: protocol PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL;
// sasl_mechanism PLAIN (default), SCRAM-SHA-256 or SCRAM-SHA-512; the CA
// bundle verifying the brokers and an optional client certificate (mTLS).
// The runner checks them (harness/runner/security.go).
type Security struct {
	Protocol      string `yaml:"protocol"`
	SASLMechanism string `yaml:"sasl_mechanism"`
	SASLUser      string `yaml:"sasl_user"`
	SASLPassword  string `yaml:"sasl_password"`
	SSLCAFile     string `yaml:"ssl_ca_file"`
	SSLCertFile   string `yaml:"ssl_cert_file"`
	SSLKeyFile    string `yaml:"ssl_key_file"`
}
