package stpeer

import (
	"encoding/xml"
	"fmt"
	"os"
	"regexp"
)

// FolderID is the ID of the one folder every instance shares.
const FolderID = "ckpt"

// Folder types, as Syncthing's config spells them.
const (
	folderSendReceive = "sendreceive"
	folderSendOnly    = "sendonly"
	folderReceiveOnly = "receiveonly"
)

// configVersion is Syncthing v1.30.0's config.CurrentVersion: a config of
// this version is loaded as it is, without migrations.
const configVersion = 37

// instanceConfig is what differs between the config.xml files of a
// cluster's instances.
type instanceConfig struct {
	Site       string
	DeviceID   string
	Listen     string // host:port of the sync protocol listener
	GUI        string // host:port of the REST API
	APIKey     string
	FolderPath string
	FolderType string
	// Peers are the other devices, each with the one address this
	// instance dials it at (its emulated link's proxy).
	Peers []peerConfig
}

type peerConfig struct {
	Site, DeviceID, Addr string
}

// The config.xml subset we write. Elements left out take Syncthing's
// defaults (config.ReadXML fills them in before decoding).
type xmlConfig struct {
	XMLName xml.Name    `xml:"configuration"`
	Version int         `xml:"version,attr"`
	Folder  xmlFolder   `xml:"folder"`
	Devices []xmlDevice `xml:"device"`
	GUI     xmlGUI      `xml:"gui"`
	Options xmlOptions  `xml:"options"`
}

type xmlFolder struct {
	ID               string            `xml:"id,attr"`
	Label            string            `xml:"label,attr"`
	Path             string            `xml:"path,attr"`
	Type             string            `xml:"type,attr"`
	RescanIntervalS  int               `xml:"rescanIntervalS,attr"`
	FSWatcherEnabled bool              `xml:"fsWatcherEnabled,attr"`
	Devices          []xmlFolderDevice `xml:"device"`
}

type xmlFolderDevice struct {
	ID string `xml:"id,attr"`
}

type xmlDevice struct {
	ID          string   `xml:"id,attr"`
	Name        string   `xml:"name,attr"`
	Compression string   `xml:"compression,attr"`
	Addresses   []string `xml:"address"`
}

type xmlGUI struct {
	Enabled bool   `xml:"enabled,attr"`
	TLS     bool   `xml:"tls,attr"`
	Address string `xml:"address"`
	APIKey  string `xml:"apikey"`
}

type xmlOptions struct {
	ListenAddresses       []string `xml:"listenAddress"`
	GlobalAnnounceEnabled bool     `xml:"globalAnnounceEnabled"`
	LocalAnnounceEnabled  bool     `xml:"localAnnounceEnabled"`
	RelaysEnabled         bool     `xml:"relaysEnabled"`
	NATEnabled            bool     `xml:"natEnabled"`
	URAccepted            int      `xml:"urAccepted"`
	AutoUpgradeIntervalH  int      `xml:"autoUpgradeIntervalH"`
	CrashReportingEnabled bool     `xml:"crashReportingEnabled"`
	StartBrowser          bool     `xml:"startBrowser"`
	SetLowPriority        bool     `xml:"setLowPriority"`
}

// rescanIntervalS is a day: the bench's scans find every change first.
const rescanIntervalS = 86400

// marshal renders c as a config.xml. See doc.go for why each option is set.
func (c instanceConfig) marshal() ([]byte, error) {
	cfg := xmlConfig{
		Version: configVersion,
		Folder: xmlFolder{
			ID:               FolderID,
			Label:            FolderID,
			Path:             c.FolderPath,
			Type:             c.FolderType,
			RescanIntervalS:  rescanIntervalS,
			FSWatcherEnabled: false,
			Devices:          []xmlFolderDevice{{ID: c.DeviceID}},
		},
		// "metadata" is Syncthing's default: compress only index and
		// request metadata, not file data.
		Devices: []xmlDevice{{ID: c.DeviceID, Name: c.Site, Compression: "metadata", Addresses: []string{"dynamic"}}},
		GUI:     xmlGUI{Enabled: true, Address: c.GUI, APIKey: c.APIKey},
		Options: xmlOptions{
			ListenAddresses: []string{"tcp://" + c.Listen},
			URAccepted:      -1, // declined
		},
	}
	for _, p := range c.Peers {
		cfg.Folder.Devices = append(cfg.Folder.Devices, xmlFolderDevice{ID: p.DeviceID})
		cfg.Devices = append(cfg.Devices, xmlDevice{ID: p.DeviceID, Name: p.Site, Compression: "metadata", Addresses: []string{"tcp://" + p.Addr}})
	}
	out, err := xml.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("stpeer: config of %s: %w", c.Site, err)
	}
	return append(out, '\n'), nil
}

func (c instanceConfig) write(file string) error {
	b, err := c.marshal()
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return fmt.Errorf("stpeer: config of %s: %w", c.Site, err)
	}
	return nil
}

// deviceIDRE matches a device ID as Syncthing prints it: eight groups of
// seven base32 characters.
var deviceIDRE = regexp.MustCompile(`\b[A-Z2-7]{7}(?:-[A-Z2-7]{7}){7}\b`)

// parseDeviceID finds the device ID in what `syncthing generate` printed
// ("... Device ID: XXXXXXX-...").
func parseDeviceID(out []byte) (string, error) {
	ids := deviceIDRE.FindAll(out, -1)
	if len(ids) != 1 {
		return "", fmt.Errorf("stpeer: want one device ID in syncthing generate's output, found %d: %q", len(ids), out)
	}
	return string(ids[0]), nil
}
