//! What one instrumentation group is, as data: [`Group`]. Each group module defines its
//! `GROUP`; [`super::GROUPS`] lists them in the skill's order, and `add`, `remove` and `status`
//! all read that list.

use crate::error::Result;
use crate::params::Params;
use crate::pithtrain::Target;
use crate::template::TemplateFile;
use memprints_python::edit::FileEdits;

/// Words that fill the placeholders of a group's [`Group::summary`], as its `insert` found
/// them in the code (e.g. the model's class names).
pub type Words = Vec<(&'static str, String)>;

/// One group of the skill.
#[derive(Debug)]
pub struct Group {
    /// The skill's id: `1A`, `1B`, `1C`, `2`, `3`, `4`, `5A`, `5B-5E`, `6` or `7`.
    pub id: &'static str,
    /// The file it edits.
    pub target: Target,
    /// What it adds where, in a few words, for `add`'s summary; UPPER_CASE words are filled from
    /// what [`Self::insert`] returns.
    pub summary: &'static str,
    /// The Python it inserts. Everything `remove` and `status` recognise of the group is read
    /// off this template (see [`super::vocabulary`]).
    pub template: TemplateFile,
    /// The blocks `status` counts, each with how many times `insert` places it.
    pub markers: &'static [Marker],
    /// Plans the group's edits on its target file.
    pub insert: fn(&mut FileEdits, &Params) -> Result<Words>,
}

impl Group {
    /// The log labels its prints produce, as `add`'s summary lists them: read off the printed
    /// format's spec ([`memprints_format::listed`]).
    pub fn labels(&self) -> Vec<&'static str> {
        memprints_format::listed(self.id)
    }
}

/// A block of a group's template that `add` places a fixed number of times, so `status` can
/// count it (by the block's signature, see [`super::vocabulary::Vocabulary::signature`]).
#[derive(Debug, Clone, Copy)]
pub struct Marker {
    /// The block's name in the group's template.
    pub block: &'static str,
    /// How many times `insert` places it.
    pub times: usize,
}

impl Marker {
    /// A block placed once.
    pub const fn once(block: &'static str) -> Self {
        Marker { block, times: 1 }
    }

    /// A block placed `times` times.
    pub const fn times(block: &'static str, times: usize) -> Self {
        Marker { block, times }
    }
}
