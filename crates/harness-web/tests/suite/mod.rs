mod fetch;
