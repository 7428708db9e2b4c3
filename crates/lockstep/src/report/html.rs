//! The self-contained `report.html` of a lab run (being written).
