//! Remembered floors: what one hand-over costs on a transmit path and how closely frames
//! handed over together leave, as the last paced run on that path (or `strobe ports
//! --floor`) measured it, kept per port location in strobe's state directory.
//!
//! A paced run needs its path's floor to coalesce hand-overs, and it sends nothing of its
//! own to measure it: it starts from the floor remembered for its location, or learns one
//! from its first hand-overs, and every run refines it from its own calls. Remembering is
//! what lets the second run on a path warn before its first frame that its rate is above
//! the path's ceiling.
//!
//! The file is `$STROBE_STATE_DIR/floors.json`, else `$XDG_STATE_HOME/strobe/floors.json`
//! (`~/.local/state/strobe/floors.json`). It is written whole through a temporary file and a
//! rename, so a reader never sees half of it, under an exclusive lock on `floors.json.lock`,
//! so that runs ending at once (a server's, a methodology's trials) keep every floor.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use strobe_engine::{FloorSource, KnownFloor, PortPacing};
use strobe_timing::PathFloor;

/// The environment variable that moves strobe's state directory.
pub const STATE_DIR_ENV: &str = "STROBE_STATE_DIR";

/// How a remembered floor was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeasuredBy {
    /// A paced run's own hand-overs (the run's frames, on the run's path).
    Run,
    /// `strobe ports --floor`'s probe frames.
    Probe,
}

/// One location's remembered floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RememberedFloor {
    pub handover_ns: u64,
    pub spacing_ns: u64,
    pub measured_by: MeasuredBy,
    /// When, in seconds since the Unix epoch.
    pub unix_s: u64,
}

impl RememberedFloor {
    pub fn floor(&self) -> PathFloor {
        PathFloor {
            handover_ns: self.handover_ns.max(1),
            spacing_ns: self.spacing_ns.max(1),
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct FloorFile {
    /// Per port location as strobe writes it (`afpacket:NS/IFACE`, `afxdp:IFACE`, …).
    floors: BTreeMap<String, RememberedFloor>,
}

/// The floors file, or none (no state directory: nothing is remembered).
#[derive(Clone, Debug)]
pub struct FloorMemory {
    path: Option<PathBuf>,
}

impl FloorMemory {
    /// The user's floors file (see the module's documentation).
    pub fn open() -> FloorMemory {
        let dir = std::env::var_os(STATE_DIR_ENV)
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| dirs::state_dir().map(|d| d.join("strobe")));
        FloorMemory {
            path: dir.map(|d| d.join("floors.json")),
        }
    }

    /// A floors file at `path` (tests, other state directories).
    pub fn at(path: &Path) -> FloorMemory {
        FloorMemory {
            path: Some(path.to_path_buf()),
        }
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Every remembered floor, by location. A file that cannot be read or parsed remembers
    /// nothing (it is rewritten whole by the next run that measures a floor).
    pub fn all(&self) -> BTreeMap<String, RememberedFloor> {
        self.read().floors
    }

    /// The floor remembered for `location`.
    pub fn recall(&self, location: &str) -> Option<RememberedFloor> {
        self.read().floors.get(location).copied()
    }

    /// Remembers `floor` for each of `entries`' locations, measured `by`.
    pub fn remember(&self, entries: &[(String, PathFloor)], by: MeasuredBy) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if entries.is_empty() {
            return Ok(());
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        // Held until the new file is in place: read, change and write as one step.
        let lock = std::fs::File::create(path.with_extension("json.lock"))?;
        let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, errno)| std::io::Error::from(errno))?;
        let mut file = self.read();
        let unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        for (location, floor) in entries {
            file.floors.insert(
                location.clone(),
                RememberedFloor {
                    handover_ns: floor.handover_ns,
                    spacing_ns: floor.spacing_ns,
                    measured_by: by,
                    unix_s,
                },
            );
        }
        let mut temp = tempfile::NamedTempFile::new_in(dir)?;
        serde_json::to_writer_pretty(&mut temp, &file)?;
        // Readable by every user, as a file written directly would be (a temporary file is
        // private).
        use std::os::unix::fs::PermissionsExt;
        temp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
        temp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }

    fn read(&self) -> FloorFile {
        self.path
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }
}

/// Where a run's paced ports get their floors before the first frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FloorChoice {
    /// The floor remembered for each port's location, else learned while running.
    #[default]
    Remembered,
    /// Learned from the run's own first hand-overs, whatever is remembered.
    Learn,
    /// This floor for every paced port.
    Given(PathFloor),
}

impl std::str::FromStr for FloorChoice {
    type Err = strobe_timing::TimingError;

    /// `learn`, `remembered`, or a floor `HANDOVER/SPACING` (e.g. `2.3us/0.9us`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "learn" => Ok(FloorChoice::Learn),
            "remembered" | "auto" => Ok(FloorChoice::Remembered),
            floor => floor.parse().map(FloorChoice::Given),
        }
    }
}

/// The floors a run knows before its first frame for ports `(name, location)`, as `choice`
/// says.
pub fn known_floors(
    choice: FloorChoice,
    ports: &[(String, String)],
    memory: &FloorMemory,
) -> Vec<(String, KnownFloor)> {
    ports
        .iter()
        .filter_map(|(name, location)| {
            let known = match choice {
                FloorChoice::Given(floor) => KnownFloor {
                    floor,
                    source: FloorSource::Given,
                },
                FloorChoice::Learn => return None,
                FloorChoice::Remembered => KnownFloor {
                    floor: memory.recall(location)?.floor(),
                    source: FloorSource::Remembered,
                },
            };
            Some((name.clone(), known))
        })
        .collect()
}

/// What a run measured of its paths' floors and is worth remembering: the observed floor of
/// each paced worker that started from a remembered floor (refined by its hand-overs), or
/// learned both its hand-over cost and its spacing (a run that never handed several frames
/// over together knows only half of it). A floor given with `--floor` is the user's, not a
/// measurement: never stored. The last worker of a port wins.
pub fn measured_floors(pacings: &[PortPacing]) -> Vec<(String, PathFloor)> {
    pacings
        .iter()
        .filter(|p| p.source != FloorSource::Given && p.observed_spacing_known)
        .filter_map(|p| Some((p.location.clone(), p.observed?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: PathFloor = PathFloor::EXAMPLE;

    #[test]
    fn a_floor_is_remembered_per_location_and_recalled() {
        let dir = tempfile::tempdir().unwrap();
        let memory = FloorMemory::at(&dir.path().join("sub").join("floors.json"));
        assert_eq!(memory.recall("afpacket:ns/a"), None);
        memory
            .remember(&[("afpacket:ns/a".into(), PATH)], MeasuredBy::Run)
            .unwrap();
        let other = PathFloor {
            handover_ns: 5_000,
            spacing_ns: 100,
        };
        memory
            .remember(&[("afxdp:ns/a".into(), other)], MeasuredBy::Probe)
            .unwrap();
        let a = memory.recall("afpacket:ns/a").unwrap();
        assert_eq!((a.floor(), a.measured_by), (PATH, MeasuredBy::Run));
        assert_eq!(memory.recall("afxdp:ns/a").unwrap().floor(), other);
        assert_eq!(memory.all().len(), 2);

        let ports = [
            ("tx".to_string(), "afpacket:ns/a".to_string()),
            ("rx".to_string(), "afpacket:ns/b".to_string()),
        ];
        let known = known_floors(FloorChoice::Remembered, &ports, &memory);
        assert_eq!(known.len(), 1);
        assert_eq!(known[0].0, "tx");
        assert_eq!(known[0].1.source, FloorSource::Remembered);
        assert!(known_floors(FloorChoice::Learn, &ports, &memory).is_empty());
        let given = known_floors(FloorChoice::Given(other), &ports, &memory);
        assert_eq!(given.len(), 2);
        assert!(given.iter().all(|(_, k)| k.source == FloorSource::Given));
    }

    #[test]
    fn an_unreadable_file_remembers_nothing_and_is_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("floors.json");
        std::fs::write(&path, b"{ not json").unwrap();
        let memory = FloorMemory::at(&path);
        assert_eq!(memory.recall("null"), None);
        memory
            .remember(&[("null".into(), PATH)], MeasuredBy::Run)
            .unwrap();
        assert_eq!(memory.recall("null").unwrap().floor(), PATH);
    }

    #[test]
    fn only_fully_learned_floors_are_worth_remembering() {
        let mut p = PortPacing::new("tx", "afpacket:ns/a", None, 256, &[]);
        assert!(measured_floors(std::slice::from_ref(&p)).is_empty());
        p.observed = Some(PATH);
        assert!(measured_floors(std::slice::from_ref(&p)).is_empty());
        p.observed_spacing_known = true;
        assert_eq!(
            measured_floors(std::slice::from_ref(&p)),
            vec![("afpacket:ns/a".to_string(), PATH)]
        );
        // A floor the user gave is not a measurement of the path.
        let given = KnownFloor {
            floor: PATH,
            source: FloorSource::Given,
        };
        let mut g = PortPacing::new("tx", "afpacket:ns/a", Some(given), 256, &[]);
        g.observed = Some(PATH);
        g.observed_spacing_known = true;
        assert!(measured_floors(&[g]).is_empty());
    }

    #[test]
    fn a_floor_choice_is_read_from_its_words_or_a_floor() {
        assert_eq!("learn".parse::<FloorChoice>().unwrap(), FloorChoice::Learn);
        assert_eq!(
            "remembered".parse::<FloorChoice>().unwrap(),
            FloorChoice::Remembered
        );
        assert_eq!(
            "2.3us/0.9us".parse::<FloorChoice>().unwrap(),
            FloorChoice::Given(PATH)
        );
        assert!("soon".parse::<FloorChoice>().is_err());
    }
}
