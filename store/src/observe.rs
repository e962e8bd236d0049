//! One object's stored state for one reconcile, read in one round trip: the object's record and
//! conditions and, as asked, the adapter it names (record, conditions, operator override) and its
//! execution (lease, sessions, proposal), the latter decided from the record once it is read. A
//! reconcile used to make each of these reads its own trip to the pool, about nine per Assignment;
//! here they share one connection and one read transaction, so they also agree with one another.
//! Also what a few writes touched (`changes.rs`), read back in one round trip for the status view.

use std::collections::{BTreeMap, BTreeSet};

use roundtable_specs::output::Condition;
use roundtable_specs::session::SessionPhase;
use roundtable_specs::{Kind, ObjectKey};
use sqlx::Row as _;

use crate::executions::{proposal_for_with, sessions_of_with};
use crate::objects::{conditions_with, object_with};
use crate::overrides::agent_override_with;
use crate::{AgentOverride, LeaseRecord, ObjectRecord, ProposalRecord, Result, SessionRecord, SourceSync, Store};

/// What [`Store::observe`] reads.
#[derive(Debug, Clone, Copy)]
pub struct Reads<'a> {
    /// The object: its record and conditions are always read.
    pub key: &'a ObjectKey,
    /// The adapter whose record, conditions and operator override are read too: an Adapter's own
    /// name, or the one an Assignment names.
    pub adapter: Option<&'a str>,
    /// An Assignment's execution, whose lease, sessions and proposal are read too.
    pub execution: Option<ExecutionReads<'a>>,
}

/// Which execution [`Reads::execution`] names.
#[derive(Debug, Clone, Copy)]
pub struct ExecutionReads<'a> {
    /// The Assignment object's uid: its sessions, proposal and lease carry it.
    pub uid: &'a str,
    /// The execution generation whose proposal is read.
    pub generation: i64,
}

/// What [`Store::observe`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observation {
    /// The object's record; `None` when the store does not know it.
    pub record: Option<ObjectRecord>,
    pub conditions: Vec<Condition>,
    /// Present when [`Reads::adapter`] named one.
    pub adapter: Option<AdapterState>,
    /// Present when [`Reads::execution`] named one.
    pub execution: Option<ExecutionState>,
}

/// An adapter as the store holds it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdapterState {
    /// `None`: nothing declares it (no object of that name).
    pub record: Option<ObjectRecord>,
    pub conditions: Vec<Condition>,
    /// An operator's runtime override of its `enabled` (made through the API).
    pub agent_override: Option<AgentOverride>,
}

/// An Assignment's execution as the store holds it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecutionState {
    /// Read before the sessions, so a claim on what was read fails if a session was recorded
    /// after them (on PostgreSQL each statement sees what was committed before it).
    pub lease: Option<LeaseRecord>,
    /// Every session of the object, newest first.
    pub sessions: Vec<SessionRecord>,
    /// The proposal of the execution generation read (see [`Store::proposal_for`]).
    pub proposal: Option<ProposalRecord>,
}

/// What [`Store::observe_with`] reads beside the object, decided from its record: [`Reads`]
/// without the object's key, owned, since it is made from a record the caller had not seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Further {
    /// See [`Reads::adapter`].
    pub adapter: Option<String>,
    /// An Assignment's execution: its object's uid and the execution generation.
    pub execution: Option<(String, i64)>,
}

impl Store {
    /// Reads what `reads` names in one round trip: one connection, one read transaction.
    pub async fn observe(&self, reads: Reads<'_>) -> Result<Observation> {
        let further = Further {
            adapter: reads.adapter.map(str::to_owned),
            execution: reads.execution.map(|e| (e.uid.to_owned(), e.generation)),
        };
        Ok(self.observe_with(reads.key, |_| (further, ())).await?.0)
    }

    /// Reads the object `key`, then what `then` asks for once it has seen the object's record
    /// (`None` when the store does not know it), in one round trip: a reconcile that learns which
    /// adapter and execution to read from the record does not need a trip of its own for it.
    /// `then`'s own answer comes back beside what was read.
    pub async fn observe_with<T>(
        &self,
        key: &ObjectKey,
        then: impl FnOnce(Option<&ObjectRecord>) -> (Further, T),
    ) -> Result<(Observation, T)> {
        let mut tx = self.pool().begin().await?;
        let record = object_with(&mut *tx, key).await?;
        let (further, answer) = then(record.as_ref());
        let conditions = conditions_with(&mut *tx, key).await?;
        let execution = match &further.execution {
            Some((uid, generation)) => {
                let lease = self.execution_lease_with(&mut tx, uid).await?;
                let sessions = sessions_of_with(&mut *tx, uid).await?;
                // Only a generation that succeeded can have taken an earlier result: without one,
                // the look for it would find nothing.
                let may_reuse = sessions
                    .iter()
                    .any(|s| s.execution_generation == *generation && s.phase == SessionPhase::Succeeded);
                let proposal = proposal_for_with(&mut tx, uid, *generation, may_reuse).await?;
                Some(ExecutionState { lease, sessions, proposal })
            }
            None => None,
        };
        let adapter = match further.adapter.as_deref() {
            Some(name) => {
                let adapter_key = ObjectKey::new(Kind::Adapter, name);
                let (record, conditions) = if &adapter_key == key {
                    (record.clone(), conditions.clone())
                } else {
                    (object_with(&mut *tx, &adapter_key).await?, conditions_with(&mut *tx, &adapter_key).await?)
                };
                let agent_override = agent_override_with(&mut *tx, name).await?;
                Some(AdapterState { record, conditions, agent_override })
            }
            None => None,
        };
        tx.commit().await?;
        Ok((Observation { record, conditions, adapter, execution }, answer))
    }
}

/// What [`Store::read_touched`] reads.
#[derive(Debug, Clone, Copy)]
pub struct TouchedReads<'a> {
    /// Objects whose record and conditions are read.
    pub objects: &'a BTreeSet<ObjectKey>,
    /// Assignment names whose sessions are read.
    pub sessions: &'a BTreeSet<String>,
    /// Adapter names whose operator override is read.
    pub overrides: &'a BTreeSet<String>,
    /// Whether the source is read.
    pub source: bool,
}

/// What [`Store::read_touched`] found: an entry for everything asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TouchedState {
    /// The record (`None`: not recorded) and its conditions (none without a record).
    pub objects: BTreeMap<ObjectKey, (Option<ObjectRecord>, Vec<Condition>)>,
    /// The sessions under each name, as [`Store::sessions`] without a name orders them.
    pub sessions: BTreeMap<String, Vec<SessionRecord>>,
    pub overrides: BTreeMap<String, Option<AgentOverride>>,
    /// The source, when asked for.
    pub source: Option<Option<SourceSync>>,
}

impl Store {
    /// Reads what `reads` names in one round trip: one connection, one read transaction, so what
    /// is read agrees with itself. A statement or two per thing named: for a few things, not for
    /// every object (a caller with many reads everything instead).
    pub async fn read_touched(&self, reads: TouchedReads<'_>) -> Result<TouchedState> {
        let mut tx = self.pool().begin().await?;
        let mut found = TouchedState::default();
        for key in reads.objects {
            let record = crate::objects::object_with(&mut *tx, key).await?;
            let conditions = match record {
                Some(_) => crate::objects::conditions_with(&mut *tx, key).await?,
                None => Vec::new(),
            };
            found.objects.insert(key.clone(), (record, conditions));
        }
        for name in reads.sessions {
            found.sessions.insert(name.clone(), crate::executions::sessions_named_with(&mut *tx, name).await?);
        }
        for name in reads.overrides {
            found.overrides.insert(name.clone(), crate::overrides::agent_override_with(&mut *tx, name).await?);
        }
        if reads.source {
            found.source = Some(crate::source::source_with(&mut *tx).await?);
        }
        tx.commit().await?;
        Ok(found)
    }

    /// The keys of the objects recorded from spec file `files` (by the name a scan gives a file).
    pub async fn object_keys_in(&self, files: &BTreeSet<String>) -> Result<Vec<ObjectKey>> {
        let mut keys = Vec::new();
        let mut tx = self.pool().begin().await?;
        for file in files {
            let rows = sqlx::query("SELECT kind, name FROM objects WHERE source_file = $1")
                .bind(file)
                .fetch_all(&mut *tx)
                .await?;
            for row in &rows {
                let kind: String = row.try_get("kind")?;
                let kind = roundtable_specs::Kind::parse(&kind)
                    .ok_or_else(|| crate::Error::Corrupt(format!("object kind {kind:?}")))?;
                keys.push(ObjectKey::new(kind, row.try_get::<String, _>("name")?));
            }
        }
        tx.commit().await?;
        Ok(keys)
    }
}
