mod smoke;
mod support;
