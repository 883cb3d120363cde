-- The lesson an award is for: part of what the request means (lessons 4 and 6),
-- so a replay can be checked against what was asked.
ALTER TABLE experience_points ADD COLUMN lesson integer;
