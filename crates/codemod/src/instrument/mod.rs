//! The instrumentation: the skill's groups, and the three things done with them.
//!
//! Each group is one module with its [`Group`] spec (id, target file, summary, template, status
//! markers, insert function; its log labels come from the printed format's spec,
//! `memprints-format`) and one template in `templates/`; [`GROUPS`] lists them in the skill's
//! order. From that list:
//!
//! - [`add`] plans every group's edits in memory and checks each rewritten file;
//! - [`strip`] takes the instrumentation out of a file again, recognising it by the
//!   [`vocabulary`] read off the same templates;
//! - [`status`] counts each group's marker blocks in a tree, and [`verify`] says per file
//!   whether what is there is exactly what `add` inserts.
//!
//! To change what a group prints, edit its template (and, for a new anchor, its module); `strip`
//! and `status` follow from the template, and the group's tests say whether they still agree.

pub mod add;
pub mod group;
pub mod status;
pub mod strip;
pub mod verify;
pub mod vocabulary;

pub mod checkpoint;
pub mod distributed;
pub mod layer_forward;
pub mod layer_helpers;
pub mod layer_internals;
pub mod pipeline;
pub mod pipeline_helpers;
pub mod setup;
pub mod setup_helpers;
pub mod snapshot;

#[cfg(test)]
mod testing;

pub use add::{AddPlan, FileChange, Placed};
pub use group::{Group, Marker, Words};

/// Every group, in the skill's order. Within one file, groups are planned in this order too.
pub static GROUPS: [&Group; 10] = [
    &pipeline_helpers::GROUP,
    &layer_helpers::GROUP,
    &setup_helpers::GROUP,
    &distributed::GROUP,
    &setup::GROUP,
    &pipeline::GROUP,
    &layer_forward::GROUP,
    &layer_internals::GROUP,
    &checkpoint::GROUP,
    &snapshot::GROUP,
];

/// The groups that edit `target`, in [`GROUPS`] order.
pub fn groups_of(target: crate::pithtrain::Target) -> impl Iterator<Item = &'static Group> {
    GROUPS.into_iter().filter(move |g| g.target == target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pithtrain::Target;

    #[test]
    fn groups_are_listed_once_in_the_skills_order() {
        let ids: Vec<&str> = GROUPS.iter().map(|g| g.id).collect();
        assert_eq!(
            ids,
            ["1A", "1B", "1C", "2", "3", "4", "5A", "5B-5E", "6", "7"]
        );
        let templates: std::collections::BTreeSet<&str> =
            GROUPS.iter().map(|g| g.template.name()).collect();
        assert_eq!(templates.len(), GROUPS.len(), "one template per group");
        assert_eq!(
            templates.len(),
            crate::template::ALL.len(),
            "every template belongs to a group"
        );
    }

    #[test]
    fn every_target_is_edited_by_some_group() {
        for target in Target::ALL {
            assert!(groups_of(target).next().is_some(), "{target:?}");
        }
    }
}
